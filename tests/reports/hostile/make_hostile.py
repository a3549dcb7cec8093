#!/usr/bin/env python3
"""Hostile inputs for cudalloc-report: small files that claim a lot (memo
references repeated), inputs whose naive handling is quadratic, blocks that
overlap or lie outside their segment, and control bytes in names.

  make_hostile.py DIR [--scale K]    writes DIR/NAME.pickle (and .json) for every case
Each case is listed in CASES with what it is; tests/reports/hostile/run.sh
runs cudalloc-report on each under a time and memory bound. --scale divides
the counts (1: the full size, as the issue reported them)."""
import argparse
import json
import os
import pickle

MIB = 1 << 20
BASE = 0x7F0000000000
FRAMES = [{'filename': '/work/train.py', 'line': 12, 'name': 'main'}]


def segment(addr, size, blocks, seg_type='large'):
    return {'device': 0, 'address': addr, 'total_size': size, 'stream': 0, 'segment_type': seg_type,
            'allocated_size': sum(b['size'] for b in blocks if b['state'] == 'active_allocated'),
            'active_size': 0, 'requested_size': 0, 'is_expandable': False, 'segment_pool_id': (0, 0),
            'frames': FRAMES, 'blocks': blocks}


def block(addr, size, state='active_allocated', frames=FRAMES):
    return {'address': addr, 'size': size, 'requested_size': size, 'state': state, 'frames': frames}


def snapshot(segments, trace, annotations=None):
    d = {'segments': segments, 'device_traces': [trace],
         'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': ''}}
    if annotations is not None:
        d['external_annotations'] = annotations
    return d


def entry(action, addr, size, t, frames=FRAMES):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t, 'frames': frames}


def shared_blocks(k):
    """Every segment names the same memoized list of blocks: a 4 KB file that
    claims millions of blocks."""
    n = 2000 // k
    blocks = [block(BASE + i * 512, 512) for i in range(n)]
    return snapshot([segment(BASE + s * n * 512, n * 512, blocks) for s in range(n)], [])


def shared_entry(k):
    """A trace of one memoized entry repeated: one dict, a million times."""
    e = entry('alloc', BASE, 512, 1)
    return snapshot([], [e] * (1000000 // k))


def one_address(k):
    """Allocations and frees over and over at one address."""
    n = 100000 // k
    trace = []
    for i in range(n):
        trace.append(entry('alloc', BASE, 512, 2 * i))
        trace.append(entry('free_requested', BASE, 512, 2 * i + 1))
        trace.append(entry('free_completed', BASE, 512, 2 * i + 1))
    return snapshot([], trace)


def reverse_annotations(k):
    """ProfilerStep annotations newest first."""
    n = 50000 // k
    trace = [entry('alloc', BASE + i * 512, 512, 10 * i) for i in range(n)]
    ann = []
    for i in reversed(range(n)):
        ann.append({'name': 'ProfilerStep#%d' % i, 'stage': 'END', 'device': 0, 'time_us': 10 * i + 5})
        ann.append({'name': 'ProfilerStep#%d' % i, 'stage': 'START', 'device': 0, 'time_us': 10 * i})
    return snapshot([], trace, ann)


def many_unmaps(k):
    """Expandable segments mapped and unmapped a granule at a time."""
    n = 100000 // k
    trace = []
    for i in range(n):
        trace.append(entry('segment_map', BASE + i * 2 * MIB, 2 * MIB, 2 * i))
        trace.append(entry('segment_unmap', BASE + i * 2 * MIB, 2 * MIB, 2 * i + 1))
    return snapshot([], trace)


def unmap_pieces(k):
    """One expandable segment mapped whole, then unmapped a granule at a time."""
    n = 100000 // k
    trace = [entry('segment_map', BASE, n * 2 * MIB, 0)]
    for i in range(n):
        trace.append(entry('segment_unmap', BASE + i * 2 * MIB, 2 * MIB, i + 1))
    return snapshot([], trace)


def overlapping_blocks(k):
    """Two allocated blocks of one segment that overlap."""
    return snapshot([segment(BASE, 4 * MIB, [block(BASE, 2 * MIB), block(BASE + MIB, 2 * MIB)])], [])


def block_outside(k):
    """A block past the end of its segment."""
    return snapshot([segment(BASE, 2 * MIB, [block(BASE, MIB), block(BASE + 3 * MIB, MIB)])], [])


TIB = 1 << 40


def huge_sizes(k):
    """64 segments of a TiB each, each one allocated block, and their trace: a
    small file naming 64 TiB (issue 30: the tools' memory followed the sizes)."""
    segs = [segment(BASE + i * 2 * TIB, TIB, [block(BASE + i * 2 * TIB, TIB)]) for i in range(64)]
    trace = [entry('alloc', BASE + i * 2 * TIB, TIB, i) for i in range(64)]
    return snapshot(segs, trace)


def huge_sizes_csv(path):
    """The same as an RMM log: 64 allocations of a TiB, then their frees, in 3
    iterations."""
    with open(path, 'w') as f:
        f.write('Thread,Time,Action,Pointer,Size,Stream\n')
        for it in range(3):
            f.write('1,0,iteration,0,%d,0x0\n' % it)
            for i in range(64):
                f.write('1,%d,allocate,%d,%d,0x0\n' % (i, i + 1, TIB + i * 4096))
            for i in range(64):
                f.write('1,%d,free,%d,%d,0x0\n' % (i, i + 1, TIB + i * 4096))


def gzip_of(path, head, body, total):
    """A gzip file of head, then body repeated to `total` bytes: small on disk,
    large inflated (issue 30: such files were inflated whole before a byte
    was looked at). The repeats are one member written many times (gzip
    reads members one after another, as `cat a.gz b.gz` makes)."""
    import gzip
    chunk = body * max(1, (1 << 20) // len(body))
    member = gzip.compress(chunk, 6)
    with open(path, 'wb') as f:
        f.write(gzip.compress(head, 6))
        f.write(member * ((total - len(head)) // len(chunk) + 1))


def bombs(d):
    """Compressed inputs of every kind that inflate to a GiB (those a reader
    can see through at once) or 256 MiB (whole snapshots and traces)."""
    big = 1024 * MIB
    gzip_of(os.path.join(d, 'zeros.pickle.gz'), b'', b'\0', big)
    gzip_of(os.path.join(d, 'zeros.csv.gz'), b'', b'\0', big)
    gzip_of(os.path.join(d, 'blank.csv.gz'), b'', b'\n', big)
    gzip_of(os.path.join(d, 'zeros.json.gz'), b'{"version": 1, "rank": 0', b' ', big)
    # a snapshot's start, then zeros: opcode 0x00 is none
    gzip_of(os.path.join(d, 'pickle_then_zeros.pickle.gz'), b'\x80\x02}', b'\0', big)
    # a snapshot's start, then a string of 256 MiB
    head = b'\x80\x04}\x8c\x08segments\x8d' + (big).to_bytes(8, 'little')
    gzip_of(os.path.join(d, 'long_string.pickle.gz'), head, b'a', big)
    # a snapshot whose trace goes on: the same entry, as distinct dicts, 256 MiB of them
    entry = (b'}(X\x06\x00\x00\x00actionX\x05\x00\x00\x00allocX\x04\x00\x00\x00addrJ\x00\x00\x10\x00'
             b'X\x04\x00\x00\x00sizeJ\x00\x02\x00\x00X\x06\x00\x00\x00streamK\x00u')
    head = b'\x80\x02}(X\x08\x00\x00\x00segments](X\r\x00\x00\x00device_traces]]('
    gzip_of(os.path.join(d, 'many_entries.pickle.gz'), head, entry, big // 4)
    # a trace whose rows go on
    gzip_of(os.path.join(d, 'many_rows.csv.gz'), b'Thread,Time,Action,Pointer,Size,Stream\n',
            b'1,0,allocate,0x1,512,0x0\n1,1,free,0x1,0,0x0\n', big // 4)


ESC = '\x1b]0;pwned\x07\x1b[31m'


def escape_frames(k):
    """Terminal escapes in frame names and file names."""
    frames = [{'filename': '/work/' + ESC + 'train.py', 'line': 7, 'name': 'step' + ESC}]
    trace = []
    for i in range(40):
        trace.append(entry('alloc', BASE + i * MIB, MIB, 2 * i, frames))
    return snapshot([segment(BASE, 64 * MIB, [block(BASE + i * MIB, MIB, frames=frames) for i in range(40)])], trace)


CASES = {
    'shared_blocks': shared_blocks, 'shared_entry': shared_entry, 'one_address': one_address,
    'reverse_annotations': reverse_annotations, 'many_unmaps': many_unmaps, 'unmap_pieces': unmap_pieces,
    'overlapping_blocks': overlapping_blocks, 'block_outside': block_outside, 'escape_frames': escape_frames,
    'huge_sizes': huge_sizes,
}


def rank_report(path, rank, code='healthy' + ESC, peak=MIB):
    """A rank's JSON report whose verdict code carries terminal escapes (or
    whose figures name exabytes)."""
    r = {'version': 1, 'generator': 'cudalloc', 'rank': rank, 'device': 0,
         'verdict': {'code': code, 'text': 'fine' + ESC},
         'iterations': {'count': 3}, 'summary': {'peak_allocated_bytes': peak, 'peak_reserved_bytes': 2 * peak},
         'leak_bytes_per_iteration': peak, 'leak_projected_oom_iteration': None, 'ooms': []}
    with open(path, 'w') as f:
        json.dump(r, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--scale', type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    for name, make in CASES.items():
        with open(os.path.join(a.dir, name + '.pickle'), 'wb') as f:
            pickle.dump(make(a.scale), f, protocol=4)
    for rank in (0, 1):
        rank_report(os.path.join(a.dir, 'rank_escape_%d.json' % rank), rank)
        rank_report(os.path.join(a.dir, 'huge_rank_%d.json' % rank), rank, 'leak', 1 << 52)
    huge_sizes_csv(os.path.join(a.dir, 'huge_sizes.csv'))
    bombs(a.dir)


if __name__ == '__main__':
    main()
