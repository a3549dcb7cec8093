#!/usr/bin/env python3
"""Segments of PyTorch memory snapshots: the file's own figures against what
cudalloc-report says, one table row per file (BENCHMARKS.md, issue 17).

  snapshot_segments.py FILE.pickle... --report BIN [--report BIN ...]

Segment count, largest free block (the largest inactive block of one
segment: no allocation spans two segments) and fragmentation (1 - largest
free / free), the file's own first, then each cudalloc-report's (its JSON),
e.g. the build before a change and after; devices in one cell, by ordinal. Files are read
with an unpickler that refuses every class, as cudalloc's reader does;
nothing is written beside them.
"""
import json
import pickle
import subprocess
import sys
import tempfile


class PlainData(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f'refused: {module}.{name}')


def mib(b):
    return f'{b / 2**20:.1f} MiB'


def reported(binary, path, device):
    with tempfile.NamedTemporaryFile(suffix='.json') as out:
        subprocess.run([binary, path, '--device', str(device), '--json', out.name], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(out.name))['fragmentation']


def figures(fr):
    free = fr['cached_free_bytes']
    return len(fr['segments']), fr['largest_free_block'], fr['fragmentation'] if free else 0.0


def main():
    args = sys.argv[1:]
    bins = [args[i + 1] for i, a in enumerate(args) if a == '--report']
    files = [a for i, a in enumerate(args) if a != '--report' and (i == 0 or args[i - 1] != '--report')]
    print('| file | segments: file / ' + ' / '.join(f'report {k + 1}' for k in range(len(bins))) +
          ' | largest free block | fragmentation |')
    print('| --- | --- | --- | --- |')
    for path in files:
        with open(path, 'rb') as f:
            snap = PlainData(f).load()
        cells = [[], [], []]
        for device in sorted({g['device'] for g in snap['segments']}):
            segs = [g for g in snap['segments'] if g['device'] == device]
            free = [b['size'] for g in segs for b in g['blocks'] if b['state'] == 'inactive']
            rows = [(len(segs), max(free, default=0), 1 - max(free) / sum(free) if sum(free) else 0.0)]
            rows += [figures(reported(b, path, device)) for b in bins]
            cells[0].append(' / '.join(str(r[0]) for r in rows))
            cells[1].append(' / '.join(mib(r[1]) for r in rows))
            cells[2].append(' / '.join(f'{100 * r[2]:.1f}%' for r in rows))
        print(f'| {path.split("/")[-1]} | ' + ' | '.join('; '.join(c) for c in cells) + ' |')


if __name__ == '__main__':
    main()
