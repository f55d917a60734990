#!/usr/bin/env python3
"""Fails when an #include crosses the project's layers the wrong way.

The layers (libckpt/README.md), each allowed to include only those listed:

  kernels, storage        leaves: nothing of the project but themselves
  libckpt/base            ckpt.h
  libckpt/format          base, kernels, storage
  libckpt/wire            base
  libckpt/src             base, format, wire, kernels, storage
  libckpt/python          ckpt.h only
  ckptd/*                 base, format, wire, kernels, storage, other ckptd modules
  tools/ckpt              ckpt.h, base, format, wire, storage (s3:// roots; and its
                          own folder, tools/sim)
  tools/bench             ckpt.h, storage (the raw-fabric baseline)
  other tools, trainer    ckpt.h (and their own folders)
  tests                   anything

Every quoted include is resolved the way the build resolves it: the
including file's folder first, then a module prefix ("wire/proto.h"), then
the leaves' and the public header's folders. An include that resolves to
nothing of the project is a system or third-party header and is ignored; an
include that climbs with "../" is refused outright.

Usage: check-layers.py [REPO_ROOT]   exit 0 clean, 1 with one line per crossing.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = re.compile(r'\.(c|h|cu|cuh|cpp|cc)$')
PREFIXES = {
    'base/': 'libckpt/base/', 'format/': 'libckpt/format/', 'wire/': 'libckpt/wire/',
    'src/': 'libckpt/src/', 'server/': 'ckptd/server/', 'mem/': 'ckptd/mem/',
    'coord/': 'ckptd/coord/', 'roles/': 'ckptd/roles/', 'notice/': 'ckptd/notice/',
}
LEAF_DIRS = ['libckpt/include', 'storage', 'kernels', 'kernels/cuda']


def module(path):
    """The layer a repository-relative path belongs to."""
    p = path.split('/')
    if p[0] == 'libckpt':
        return 'libckpt/' + p[1] if len(p) > 2 else 'libckpt'
    if p[0] == 'ckptd':
        return 'ckptd'
    if p[0] == 'tools':
        return 'tools/' + p[1] if len(p) > 2 else 'tools'
    if p[0] == 'kernels':
        return 'kernels'
    return p[0]


LIB = {'libckpt/include', 'libckpt/base', 'libckpt/format', 'libckpt/wire'}
ALLOWED = {
    'kernels': {'kernels'},
    'storage': {'storage'},
    'libckpt/include': {'libckpt/include'},
    'libckpt/base': {'libckpt/include', 'libckpt/base'},
    'libckpt/format': {'libckpt/include', 'libckpt/base', 'libckpt/format', 'kernels', 'storage'},
    'libckpt/wire': {'libckpt/include', 'libckpt/base', 'libckpt/wire'},
    'libckpt/src': LIB | {'libckpt/src', 'kernels', 'storage'},
    'libckpt/python': {'libckpt/include', 'libckpt/python'},
    'ckptd': LIB | {'ckptd', 'kernels', 'storage'},
    # storage: the S3 client, for ckpt ls/show/verify/rm/gc on an s3:// root.
    'tools/ckpt': LIB | {'tools/ckpt', 'tools/sim', 'storage'},
    # The raw-fabric baseline that the peer tier is measured against.
    'tools/bench': {'libckpt/include', 'tools/bench', 'storage'},
}


def allowed(frm):
    if frm in ALLOWED:
        return ALLOWED[frm]
    if frm == 'tests':
        return None  # anything
    # Other tools, the trainer, examples: the public header and themselves.
    return {'libckpt/include', frm}


def resolve(root, frm_file, inc):
    here = os.path.dirname(frm_file)
    cands = [os.path.normpath(os.path.join(here, inc))]
    for pre, real in PREFIXES.items():
        if inc.startswith(pre):
            cands.append(real + inc[len(pre):])
    cands += [d + '/' + inc for d in LEAF_DIRS]
    for c in cands:
        if os.path.isfile(os.path.join(root, c)):
            return c
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), '..', '..'))
    bad = []
    for top in ['libckpt', 'ckptd', 'tools', 'storage', 'kernels', 'trainer']:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if not x.startswith(('.', 'build'))]
            for f in files:
                if not SOURCE.search(f):
                    continue
                path = os.path.relpath(os.path.join(d, f), root)
                frm = module(path)
                ok = allowed(frm)
                with open(os.path.join(root, path), errors='replace') as fh:
                    text = fh.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count('\n', 0, m.start()) + 1
                    if inc.startswith('../') or '/../' in inc:
                        bad.append(f'{path}:{line}: "{inc}" climbs out of its folder; name the module instead')
                        continue
                    tgt = resolve(root, path, inc)
                    if tgt is None or ok is None:
                        continue
                    to = module(tgt)
                    if to not in ok:
                        bad.append(f'{path}:{line}: {frm} may not include {tgt} ({to})')
    for b in bad:
        print(b)
    if bad:
        print(f'check-layers: {len(bad)} include(s) cross the layers the wrong way (libckpt/README.md)')
        return 1
    print('check-layers: every include points one way')
    return 0


if __name__ == '__main__':
    sys.exit(main())
