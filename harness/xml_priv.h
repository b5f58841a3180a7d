/* harness/xml_priv.h — XML text escaping, shared by the tools' JUnit and
 * HTML writers and the CUnit runner's JUnit file (tests/main.c). */
#ifndef DDP_XML_PRIV_H
#define DDP_XML_PRIV_H

#include <stdio.h>

void ddp__xml_text(FILE *f, const char *s);

#endif
