"""tests/differential/torch_oracle.py FAMILY < inputs > answers

torch 1.13's own readings, one answer line per input line, for `make
differential` and the addr suite's sample (tests/torch_gen.c compares them
with ddpsim's). An input line is the input's bytes in hex (so newlines and
odd bytes survive), decoded as os.environ decodes the environment (UTF-8,
surrogateescape). Families:

  endpoint   parse_rendezvous_endpoint(text, default_port=29400):
             "ok HOSTHEX PORT" or "err"
  thishost   _matches_machine_hostname(text): "1" or "0"
  gloo       ProcessGroupGloo(HashStore(), 0, 1, 5 s) with
             GLOO_SOCKET_IFNAME=text: "ok" or "err"

Run it with scripts/torch-python (exit 127 there: no torch). torch is
imported once per run.
"""
import datetime
import os
import sys


def inputs():
    for line in sys.stdin:
        yield bytes.fromhex(line.strip()).decode("utf-8", "surrogateescape")


def hexof(text):
    return text.encode("utf-8", "surrogateescape").hex()


def endpoint(text):
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    try:
        host, port = parse_rendezvous_endpoint(text, default_port=29400)
    except ValueError:
        return "err"
    return "ok %s %d" % (hexof(host) or "-", port)


def thishost(text):
    from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname

    return "1" if _matches_machine_hostname(text) else "0"


def gloo(text):
    import torch.distributed as dist

    os.environ["GLOO_SOCKET_IFNAME"] = text
    try:
        pg = dist.ProcessGroupGloo(dist.HashStore(), 0, 1, datetime.timedelta(seconds=5))
    except RuntimeError:
        return "err"
    del pg
    return "ok"


def main():
    family = {"endpoint": endpoint, "thishost": thishost, "gloo": gloo}.get(
        sys.argv[1] if len(sys.argv) > 1 else "")
    if family is None:
        sys.exit("torch_oracle.py: FAMILY must be endpoint, thishost or gloo, not %r"
                 % sys.argv[1:])
    for text in inputs():
        print(family(text))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
