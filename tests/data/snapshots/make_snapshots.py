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

With --segments, PyTorch's classic segments instead (ClassicDevice): a
small pool (blocks up to 1 MiB, in 2 MiB segments) and a large pool (20
MiB segments for requests under 10 MiB, else the request rounded up to 2
MiB), each segment one cudaMalloc placed right after the last, so hundreds
of segments touch in the address space; best fit in a pool's segments,
blocks split and merged, empty_cache() releasing the free ones; a side
stream and a CUDA graph's private pool (segment_pool_id (1, 2)) have
segments of their own. --no-trace dumps the segments only, as a snapshot
taken without _record_memory_history().

  make_snapshots.py OUT.pickle [--leak] [--iterations N] [--protocol P]
                    [--max-entries N] [--annotations] [--requested-only]
                    [--no-frames] [--devices N] [--oom] [--oom-device D]
                    [--classic] [--segments] [--params N] [--no-trace]
                    [--gzip] [--zip]
                    [--scenario forward|step|steps] [--layers N] [--params-per-layer N]
                    [--no-grad] [--optimizer-annotation] [--handoff] [--seed N]
                    [--eval-leak] [--backward-leak]
  (--scenario: a deep model's forward, one training step or several, with
  an optimizer looping over its parameters: scenarios.py)
  make_snapshots.py --fixtures DIR   the committed fixtures (tests/data/snapshots)
--gzip writes the pickle gzipped (snapshot.pickle.gz); --zip writes what
torch.save() writes instead of a snapshot: a zip archive holding the pickle.
"""
import argparse
import gzip
import io
import os
import pickle
import zipfile

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


class ClassicDevice:
    """PyTorch's classic segments (see the module's docstring)."""
    SMALL, LARGE = 'small', 'large'

    def __init__(self, ordinal, opt):
        self.ordinal = ordinal
        self.opt = opt
        self.next_addr = BASE + ordinal * (1 << 36)
        self.segs = {}             # addr -> {size, pool, stream, pool_id, blocks: {addr: [size, requested, site]}}
        self.trace = []
        self.time = 1_700_000_000_000_000 + ordinal
        self.recording = not opt.no_trace

    def entry(self, action, addr, size, stream, site=None):
        if not self.recording:
            return
        self.time += 7
        e = {'action': action, 'addr': addr, 'size': size, 'stream': stream, 'time_us': self.time}
        if not self.opt.no_frames:
            e['frames'] = SITES[site] if site else []
        self.trace.append(e)

    @staticmethod
    def segment_size(pool, size):
        if pool == ClassicDevice.SMALL:
            return 2 * MIB
        return 20 * MIB if size < 10 * MIB else (size + GRANULE - 1) // GRANULE * GRANULE

    def free_blocks(self, seg):
        """[(addr, size)] of the gaps between a segment's blocks."""
        out, at = [], seg['addr']
        for a in sorted(seg['blocks']):
            if a > at:
                out.append((at, a - at))
            at = a + seg['blocks'][a][0]
        if at < seg['addr'] + seg['size']:
            out.append((at, seg['addr'] + seg['size'] - at))
        return out

    def alloc(self, requested, site, stream=0, pool_id=(0, 0)):
        size = round_block(requested)
        pool = self.SMALL if size <= MIB else self.LARGE
        fits = [(fs, fa, seg) for seg in self.segs.values()
                if seg['pool'] == pool and seg['stream'] == stream and seg['pool_id'] == pool_id
                for fa, fs in self.free_blocks(seg) if fs >= size]
        if fits:
            fs, addr, seg = min(fits, key=lambda f: (f[0], f[1]))
        else:
            total = self.segment_size(pool, size)
            seg = {'addr': self.next_addr, 'size': total, 'pool': pool, 'stream': stream, 'pool_id': pool_id,
                   'blocks': {}}
            self.segs[seg['addr']] = seg
            self.next_addr += total
            self.entry('segment_alloc', seg['addr'], total, stream)
            fs, addr = total, seg['addr']
        # split unless what is left is too small to serve a request of the pool
        rest = fs - size
        if rest and (rest < 512 if pool == self.SMALL else rest <= MIB):
            size = fs
        seg['blocks'][addr] = [size, requested, site]
        self.entry('alloc', addr, requested, stream, site)
        return addr

    def free(self, addr):
        for seg in self.segs.values():
            if addr in seg['blocks']:
                size, requested, site = seg['blocks'].pop(addr)
                self.entry('free_requested', addr, requested, seg['stream'], site)
                self.entry('free_completed', addr, requested, seg['stream'], site)
                return
        raise KeyError(hex(addr))

    def empty_cache(self):
        for a in sorted(self.segs):
            seg = self.segs[a]
            if not seg['blocks']:
                del self.segs[a]
                self.entry('segment_free', a, seg['size'], seg['stream'])

    def oom(self, requested, site, free):
        pass

    def segments(self):
        out = []
        for a in sorted(self.segs):
            seg = self.segs[a]
            blocks = [{'address': fa, 'size': fs, 'requested_size': 0, 'state': 'inactive', 'frames': []}
                      for fa, fs in self.free_blocks(seg)]
            for ba, (size, requested, site) in seg['blocks'].items():
                blocks.append({'address': ba, 'size': size, 'requested_size': requested, 'state': 'active_allocated',
                               'frames': [] if self.opt.no_frames else SITES[site]})
            blocks.sort(key=lambda b: b['address'])
            active = [b for b in blocks if b['state'] != 'inactive']
            out.append({
                'device': self.ordinal, 'address': a, 'total_size': seg['size'], 'stream': seg['stream'],
                'segment_type': seg['pool'], 'segment_pool_id': seg['pool_id'],
                'allocated_size': sum(b['size'] for b in active), 'active_size': sum(b['size'] for b in active),
                'requested_size': sum(b['requested_size'] for b in active), 'is_expandable': False,
                'frames': [], 'blocks': blocks,
            })
        return out


def train_segments(dev, opt):
    """A model's parameters, each large one in a segment of its own and the
    small ones packed into 2 MiB segments, then steps whose activations of
    many sizes leave holes; a side stream's and a CUDA graph's segments;
    empty_cache() half way; at the end three parameters in touching
    segments dropped (their segments stay, all free, side by side)."""
    params = [dev.alloc((11 + i * 7 % 19) * MIB + 4096 * (i % 5), 'weight') for i in range(opt.params)]
    params += [dev.alloc(300 * 1024 + 512 * (i % 9), 'weight') for i in range(opt.params // 2)]
    graph = [dev.alloc(3 * MIB, 'act1', pool_id=(1, 2)), dev.alloc(256 * 1024, 'act2', pool_id=(1, 2))]
    side = dev.alloc(5 * MIB, 'grad', stream=7)
    kept = []
    for it in range(opt.iterations):
        acts = []
        for k in range(12):
            acts.append(dev.alloc((14 + (it * 5 + k * 3) % 23) * MIB + 512 * k, 'act1'))
            acts.append(dev.alloc((1 + (it + k) % 7) * MIB // 2 + 100, 'act2'))
            acts.append(dev.alloc(4096 * (1 + k) + it, 'grad'))
        if opt.leak:
            kept.append(dev.alloc(MIB + 4096 * it, 'leak'))
        for a in acts[::3] + acts[2::3]:
            dev.free(a)
        kept.extend(acts[1::6])
        for a in acts[4::6]:
            dev.free(a)
        if it == opt.iterations // 2:
            dev.empty_cache()
    for a in params[40:43]:
        dev.free(a)
    return params, graph, side, kept


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
    if opt.oom and opt.oom_device in (None, dev.ordinal):
        dev.oom(64 << 30, 'huge', 1 << 30)
    return weights, kept


def build(opt):
    annotations = []
    devices = [(ClassicDevice if opt.segments else Device)(d, opt) for d in range(opt.devices)]
    for dev in devices:
        if opt.scenario:
            import scenarios
            scenarios.run(dev, opt, annotations)
        elif opt.segments:
            train_segments(dev, opt)
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
        'device_traces': [[] for _ in traces] if opt.no_trace else traces,
        'allocator_settings': {
            'PYTORCH_CUDA_ALLOC_CONF': '' if opt.classic or opt.segments else 'expandable_segments:True',
            'max_split_size': -1, 'garbage_collection_threshold': 0.0,
            'expandable_segments': not (opt.classic or opt.segments), 'pinned_num_register_threads': 1,
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
    p.add_argument('--oom-device', type=int)
    p.add_argument('--segments', action='store_true')
    p.add_argument('--params', type=int, default=160)
    p.add_argument('--no-trace', action='store_true')
    p.add_argument('--gzip', action='store_true')
    p.add_argument('--zip', action='store_true')
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
    'segments.pickle': ['--segments', '--iterations', '8', '--max-entries', '900'],
    'segments_no_trace.pickle': ['--segments', '--iterations', '4', '--params', '60', '--no-trace'],
    'three_devices_oom_on_1.pickle': ['--devices', '3', '--oom', '--oom-device', '1', '--iterations', '4'],
    # issue 34: several devices read as one run, the one that ran out first
    'two_devices_oom_on_1.pickle': ['--devices', '2', '--oom', '--oom-device', '1'],
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


def write(path, snap, opt):
    """The pickle, gzipped with --gzip (no name, time 0: the same bytes every
    time); with --zip, a zip archive as torch.save() writes one (its pickle
    in archive/data.pkl)."""
    data = pickle.dumps(snap, protocol=opt.protocol)
    if opt.gzip:
        buf = io.BytesIO()
        with gzip.GzipFile(filename='', mode='wb', fileobj=buf, mtime=0) as g:
            g.write(data)
        data = buf.getvalue()
    elif opt.zip:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, 'w', zipfile.ZIP_STORED) as z:
            for name, content in (('archive/data.pkl', data), ('archive/byteorder', b'little'),
                                  ('archive/version', b'3\n')):
                z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), content)
        data = buf.getvalue()
    with open(path, 'wb') as f:
        f.write(data)


def main():
    opt = options()
    if opt.fixtures:
        for name, args in FIXTURES.items():
            o = options(args)
            write(os.path.join(opt.fixtures, name), build(o), o)
        return
    if not opt.out:
        raise SystemExit('usage: make_snapshots.py OUT.pickle [options] | --fixtures DIR')
    write(opt.out, build(opt), opt)


if __name__ == '__main__':
    main()
