#!/usr/bin/env python3
"""PyTorch memory snapshots built by hand, for cudalloc-report's tests.

A snapshot is what torch.cuda.memory._dump_snapshot() pickles (see
torch/cuda/memory.py, _snapshot's docstring, and
torch/csrc/cuda/memory_snapshot.cpp): a dict with
  segments:       [{device, address, total_size, stream, segment_type,
                    allocated_size, active_size, requested_size, is_expandable,
                    segment_pool_id, frames, blocks: [{address, size,
                    requested_size, state, frames}]}]
  device_traces:  [[{action, addr | device_free, size, stream, time_us,
                     frames}]]   one list per device, oldest first
  allocator_settings: {...}
  external_annotations: [{name, stage, time_us, device}] (newer versions)
Frames are {filename, line, name}, innermost first, C++ frames (the caching
allocator's) before the Python ones, as PyTorch records them with
stacks="all".

A small simulation stands in for PyTorch's allocator: one expandable segment
per device, mapped in 2 MiB granules as it grows (segment_map) and never
unmapped; blocks placed first-fit, sizes rounded up to 512 bytes. A training
loop runs on it: weights made once, activations made and freed every
iteration, and (leaky) one 1 MiB tensor a step kept in a list by
train.py:42. The trace can be cut to its last N entries, as
_record_memory_history(max_entries=N) keeps a ring: what was allocated
before the cut is then only in the segments.

  make_snapshots.py OUT.pickle [--leak] [--iterations N] [--protocol P]
                    [--max-entries N] [--annotations] [--requested-only]
                    [--no-frames] [--devices N] [--oom] [--classic]
                    [--scenario forward|step|steps] [--layers N] [--params-per-layer N]
                    [--no-grad] [--optimizer-annotation] [--handoff] [--seed N]
                    [--eval-leak] [--backward-leak]
  (--scenario: a deep model's forward, one training step or several, with
  an optimizer looping over its parameters: scenarios.py)
  make_snapshots.py --fixtures DIR   the committed fixtures (tests/data/snapshots)
"""
import argparse
import os
import pickle

MIB = 1 << 20
GRANULE = 2 * MIB
BASE = 0x7F0000000000

CPP = [
    {'filename': '/pytorch/c10/cuda/CUDACachingAllocator.cpp', 'line': 1166,
     'name': 'c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc'},
    {'filename': '/pytorch/aten/src/ATen/native/TensorFactories.cpp', 'line': 241, 'name': 'at::native::empty'},
]


def stack(*py):
    """C++ frames first (innermost), then the Python ones given innermost first."""
    return CPP + [{'filename': f, 'line': l, 'name': n} for (n, f, l) in py]


# One frames list per call site, shared by every entry of that site: the
# pickler writes it once and fetches it from the memo after, as PyTorch's
# dumps do for their de-duplicated tracebacks.
SITES = {
    'weight': stack(('__init__', '/work/model.py', 10), ('main', '/work/train.py', 12)),
    'act1': stack(('forward', '/work/model.py', 30), ('train_step', '/work/train.py', 40), ('main', '/work/train.py', 90)),
    'act2': stack(('forward', '/work/model.py', 31), ('train_step', '/work/train.py', 40), ('main', '/work/train.py', 90)),
    'grad': stack(('backward', '/work/model.py', 55), ('train_step', '/work/train.py', 41), ('main', '/work/train.py', 90)),
    'leak': stack(('train_step', '/work/train.py', 42), ('main', '/work/train.py', 90)),
    'huge': stack(('evaluate', '/work/train.py', 70), ('main', '/work/train.py', 95)),
}


def round_block(n):
    return max(512, (n + 511) // 512 * 512)


class Device:
    def __init__(self, ordinal, opt):
        self.ordinal = ordinal
        self.opt = opt
        self.base = BASE + ordinal * (1 << 36)
        self.mapped = 0            # bytes mapped from base
        self.blocks = {}           # addr -> (size, requested, site)
        self.trace = []
        self.time = 1_700_000_000_000_000 + ordinal

    def tick(self):
        self.time += 7
        return self.time

    def entry(self, action, addr, size, site=None, **extra):
        e = {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': self.tick()}
        e.update(extra)
        if site is not None and not self.opt.no_frames:
            e['frames'] = SITES[site]
        elif not self.opt.no_frames:
            e['frames'] = []
        self.trace.append(e)

    def place(self, size):
        """First fit in the mapped range, else at its end (mapping granules)."""
        at = self.base
        for a in sorted(self.blocks):
            if a - at >= size:
                return at
            at = max(at, a + self.blocks[a][0])
        return at

    def alloc(self, requested, site):
        size = round_block(requested)
        addr = self.place(size)
        end = addr + size - self.base
        while self.mapped < end:
            grow = (end - self.mapped + GRANULE - 1) // GRANULE * GRANULE
            action = 'segment_alloc' if self.opt.classic else 'segment_map'
            self.entry(action, self.base + self.mapped, grow)
            self.mapped += grow
        self.blocks[addr] = (size, requested, site)
        self.entry('alloc', addr, requested, site)
        return addr

    def free(self, addr):
        size, requested, site = self.blocks.pop(addr)
        self.entry('free_requested', addr, requested, site)
        if not self.opt.requested_only:
            self.entry('free_completed', addr, requested, site)

    def oom(self, requested, site, free):
        e = {'action': 'oom', 'device_free': free, 'size': requested, 'stream': 0, 'time_us': self.tick()}
        if not self.opt.no_frames:
            e['frames'] = SITES[site]
        self.trace.append(e)

    def segments(self):
        if not self.mapped:
            return []
        blocks, at = [], self.base
        for a in sorted(self.blocks):
            if a > at:
                blocks.append({'address': at, 'size': a - at, 'requested_size': 0, 'state': 'inactive', 'frames': []})
            size, requested, site = self.blocks[a]
            b = {'address': a, 'size': size, 'requested_size': requested, 'state': 'active_allocated'}
            b['frames'] = [] if self.opt.no_frames else SITES[site]
            blocks.append(b)
            at = a + size
        end = self.base + self.mapped
        if end > at:
            blocks.append({'address': at, 'size': end - at, 'requested_size': 0, 'state': 'inactive', 'frames': []})
        active = [b for b in blocks if b['state'] != 'inactive']
        return [{
            'device': self.ordinal, 'address': self.base, 'total_size': self.mapped, 'stream': 0,
            'segment_type': 'large', 'segment_pool_id': (0, 0),
            'allocated_size': sum(b['size'] for b in active), 'active_size': sum(b['size'] for b in active),
            'requested_size': sum(b['requested_size'] for b in active), 'is_expandable': not self.opt.classic,
            'frames': [], 'blocks': blocks,
        }]


def train(dev, opt, annotations):
    weights = [dev.alloc(8 * MIB, 'weight') for _ in range(4)]
    kept = []
    for it in range(opt.iterations):
        if opt.annotations:
            annotations.append({'name': f'ProfilerStep#{it}', 'stage': 'START', 'time_us': dev.tick(),
                                'device': dev.ordinal})
        a1 = dev.alloc(6 * MIB + 100, 'act1')
        a2 = dev.alloc(3 * MIB, 'act2')
        g = dev.alloc(2 * MIB + 4096, 'grad')
        if opt.leak:
            kept.append(dev.alloc(MIB, 'leak'))
        for p in (g, a2, a1):
            dev.free(p)
        if opt.annotations:
            annotations.append({'name': f'ProfilerStep#{it}', 'stage': 'END', 'time_us': dev.tick(),
                                'device': dev.ordinal})
    if opt.oom:
        dev.oom(64 << 30, 'huge', 1 << 30)
    return weights, kept


def build(opt):
    annotations = []
    devices = [Device(d, opt) for d in range(opt.devices)]
    for dev in devices:
        if opt.scenario:
            import scenarios
            scenarios.run(dev, opt, annotations)
        else:
            train(dev, opt, annotations)
    traces = []
    for dev in devices:
        t = dev.trace
        if opt.max_entries and len(t) > opt.max_entries:
            t = t[-opt.max_entries:]
        traces.append(t)
    snap = {
        'segments': [s for dev in devices for s in dev.segments()],
        'device_traces': traces,
        'allocator_settings': {
            'PYTORCH_CUDA_ALLOC_CONF': '' if opt.classic else 'expandable_segments:True',
            'max_split_size': -1, 'garbage_collection_threshold': 0.0,
            'expandable_segments': not opt.classic, 'pinned_num_register_threads': 1,
            'release_lock_on_cudamalloc': False, 'pinned_use_cuda_host_register': False,
            'roundup_power2_divisions': {},
        },
    }
    if opt.annotations or opt.optimizer_annotation:
        snap['external_annotations'] = annotations
    return snap


def options(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('out', nargs='?')
    p.add_argument('--leak', action='store_true')
    p.add_argument('--iterations', type=int, default=12)
    p.add_argument('--protocol', type=int, default=4)
    p.add_argument('--max-entries', type=int, default=0)
    p.add_argument('--annotations', action='store_true')
    p.add_argument('--requested-only', action='store_true')
    p.add_argument('--no-frames', action='store_true')
    p.add_argument('--devices', type=int, default=1)
    p.add_argument('--oom', action='store_true')
    p.add_argument('--classic', action='store_true')
    p.add_argument('--fixtures', metavar='DIR')
    p.add_argument('--scenario', choices=['forward', 'step', 'steps'])
    p.add_argument('--layers', type=int, default=24)
    p.add_argument('--params-per-layer', type=int, default=4)
    p.add_argument('--no-grad', action='store_true')
    p.add_argument('--optimizer-annotation', action='store_true')
    p.add_argument('--handoff', action='store_true')
    p.add_argument('--eval-leak', action='store_true')
    p.add_argument('--backward-leak', action='store_true')
    p.add_argument('--seed', type=int, default=0)
    return p.parse_args(argv)


FIXTURES = {
    # name: arguments
    'leaky.pickle': ['--leak', '--max-entries', '120'],
    'clean.pickle': ['--protocol', '2'],
    'leaky_annotated_p5.pickle': ['--leak', '--annotations', '--protocol', '5', '--requested-only'],
    'two_devices_oom.pickle': ['--leak', '--devices', '2', '--oom', '--classic'],
    # issue 17: what a training loop's iterations are, and what they are not
    'forward_48_layers.pickle': ['--scenario', 'forward', '--layers', '48'],
    'forward_48_layers_no_frames.pickle': ['--scenario', 'forward', '--layers', '48', '--no-frames'],
    'one_step.pickle': ['--scenario', 'step', '--layers', '12', '--params-per-layer', '2'],
    'one_step_optimizer_annotated.pickle': ['--scenario', 'step', '--layers', '12', '--params-per-layer', '2',
                                            '--optimizer-annotation'],
    'optimizer_loop_no_frames.pickle': ['--scenario', 'steps', '--iterations', '2', '--layers', '24', '--no-frames',
                                        '--max-entries', '500'],
    'steps_profiler.pickle': ['--scenario', 'steps', '--iterations', '6', '--layers', '6', '--params-per-layer', '2',
                              '--annotations'],
    'steps_detected.pickle': ['--scenario', 'steps', '--iterations', '6', '--layers', '6', '--params-per-layer', '2'],
    'steps_leak.pickle': ['--scenario', 'steps', '--iterations', '8', '--layers', '6', '--params-per-layer', '2',
                          '--leak'],
    'steps_handoff.pickle': ['--scenario', 'steps', '--iterations', '8', '--layers', '6', '--params-per-layer', '2',
                             '--handoff'],
}


def main():
    opt = options()
    if opt.fixtures:
        for name, args in FIXTURES.items():
            o = options(args)
            with open(os.path.join(opt.fixtures, name), 'wb') as f:
                pickle.dump(build(o), f, protocol=o.protocol)
        return
    if not opt.out:
        raise SystemExit('usage: make_snapshots.py OUT.pickle [options] | --fixtures DIR')
    with open(opt.out, 'wb') as f:
        pickle.dump(build(opt), f, protocol=opt.protocol)


if __name__ == '__main__':
    main()
