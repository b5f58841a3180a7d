/* harness/xml.c — text escaped for XML (JUnit files, HTML pages): the five
 * special characters as entities, control characters other than newline
 * and tab dropped (XML 1.0 cannot hold them). */
#include <stdio.h>

#include "xml_priv.h"

void ddp__xml_text(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
                fputc(*s, f);
        }
    }
}
