#!/usr/bin/env python3
# tests/fuzz/make-seeds.py — regenerates the seed corpora in tests/fuzz/corpus/
# (checked in; run from the repository root only to change them):
#   store_server/  client scripts (fuzz_store_server.c's format) covering
#                  every opcode, split and pipelined requests, WAIT woken by
#                  another client, slow readers, hang-ups, protocol errors
#   hostlist/      the edge cases of tests/hostlist/scontrol-22.05.txt
#   scenario/      the bundled scenarios with their includes inlined
import os, re, struct

root = os.getcwd()
out = os.path.join(root, 'tests/fuzz/corpus')
MAGIC = 0x3C85F7CE
OPS = dict(VALIDATE=0, SET=1, COMPARE_SET=2, GET=3, ADD=4, CHECK=5, WAIT=6,
           GETNUMKEYS=7, DELETE_KEY=8, APPEND=9, MULTI_GET=10, MULTI_SET=11,
           CANCEL_WAIT=12, PING=13, QUEUE_PUSH=14, QUEUE_POP=15, QUEUE_LEN=16,
           LIST_KEYS=17)

def s(b): return struct.pack('<Q', len(b)) + b
def req(op, *parts): return bytes([OPS[op]]) + b''.join(parts)
def connect(): return b'\x00'
def validate(c): return bytes([2, c])
def send(c, data):
    out = b''
    while data:  # op 1 carries at most 255 bytes
        chunk, data = data[:255], data[255:]
        out += bytes([1, c, len(chunk)]) + chunk
    return out
def window(c, n=255): return bytes([5, c, n])
def eof(c): return bytes([3, c])
def reset(c): return bytes([4, c])
def wait(n): return bytes([6, n])
def steps(n=7): return bytes([7, n])

k, v = b'/key', b'value'
seeds = {
    'set-get': connect() + validate(0) + send(0, req('SET', s(k), s(v)) + req('GET', s(k))) + window(0) + steps(),
    'every-op': connect() + validate(0) + send(0,
        req('SET', s(k), s(v)) + req('COMPARE_SET', s(k), s(v), s(b'new')) +
        req('GET', s(k)) + req('ADD', s(b'/n'), struct.pack('<q', 5)) +
        req('CHECK', struct.pack('<Q', 2), s(k), s(b'/n')) + req('GETNUMKEYS') +
        req('APPEND', s(k), s(b'+')) + req('MULTI_SET', struct.pack('<Q', 1), s(b'/m'), s(b'x')) +
        req('MULTI_GET', struct.pack('<Q', 2), s(k), s(b'/m')) + req('PING', struct.pack('<I', 7)) +
        req('QUEUE_PUSH', s(b'/q'), s(b'item')) + req('QUEUE_LEN', s(b'/q')) +
        req('QUEUE_POP', s(b'/q')) + req('LIST_KEYS') + req('DELETE_KEY', s(k)) +
        req('CANCEL_WAIT')) + window(0) + steps(),
    'wait-woken': connect() + connect() + validate(0) + validate(1) +
        send(0, req('WAIT', struct.pack('<Q', 1), s(b'/late'))) + steps(2) +
        send(1, req('SET', s(b'/late'), s(b'1'))) + window(0) + window(1) + steps(),
    'split-request': connect() + validate(0) +
        send(0, req('SET', s(k), s(v))[:3]) + steps(1) + send(0, req('SET', s(k), s(v))[3:]) +
        send(0, req('GET', s(k))) + window(0, 0) + steps(),
    'slow-reader-multiget': connect() + validate(0) +
        send(0, req('SET', s(b'/big'), s(b'x' * 900)) +
             req('MULTI_GET', struct.pack('<Q', 8), *([s(b'/big')] * 8))) +
        window(0, 1) + steps() + window(0, 3) + steps(),
    'no-validate-timeout': connect() + send(0, req('GET', s(k))[:1]) + wait(30) + steps(),
    'bad-first-message': connect() + send(0, req('GET', s(k))) + steps(),
    'bad-magic': connect() + send(0, b'\x00\x01\x02\x03\x04') + steps(),
    'oversized-value': connect() + validate(0) + send(0, bytes([1]) + s(k) + struct.pack('<Q', 1 << 40)) + steps(),
    'unknown-opcode': connect() + validate(0) + send(0, b'\x63') + steps(),
    'queue-pop-waits': connect() + connect() + validate(0) + validate(1) +
        send(0, req('QUEUE_POP', s(b'/q'))) + steps(1) +
        send(1, req('QUEUE_PUSH', s(b'/q'), s(b'a'))) + window(0) + steps(),
    'hangups': connect() + connect() + connect() + validate(0) + validate(1) +
        send(0, req('WAIT', struct.pack('<Q', 1), s(b'/x'))) + eof(0) + reset(1) +
        send(2, b'\x00\xce') + eof(2) + steps(),
    'too-many-clients': b''.join(connect() for _ in range(8)) + b''.join(validate(c) for c in range(8)) + steps(),
    'validate-twice': connect() + validate(0) + validate(0) + steps(),
}
for name, data in seeds.items():
    open(os.path.join(out, 'store_server', name), 'wb').write(data)

rows = [l.split('\t')[0] for l in open(os.path.join(root, 'tests/hostlist/scontrol-22.05.txt'))
        if not l.startswith('#')][:40]
rows += ['gpu[1-2]-ib', 'a,,b', 'node[5-]', 'n]', 'node[1-', 'x[1-3]y[01-02]z', '  a ,\tb  ']
for i, e in enumerate(rows):
    open(os.path.join(out, 'hostlist', '%02d' % i), 'w').write(e)

def inline(path, depth=0):
    text = []
    for line in open(path):
        m = re.match(r'\s*include\s+"([^"]+)"', line)
        if m and depth < 8:
            text.append(inline(os.path.join(os.path.dirname(path), m.group(1)), depth + 1))
        else:
            text.append(line)
    return ''.join(text)

for d in ('scenarios', 'tests/scenarios/roundtrip'):
    for f in sorted(os.listdir(os.path.join(root, d))):
        if f.endswith('.scn'):
            name = (d.split('/')[-1] + '-' + f[:-4])
            open(os.path.join(out, 'scenario', name), 'w').write(inline(os.path.join(root, d, f)))
