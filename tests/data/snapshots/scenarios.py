"""Training runs of a deep model, for make_snapshots.py --scenario.

What real snapshots hold, made on the same small simulated allocator
(make_snapshots.Device): a model of N identical layers whose forward pass
saves activations for backward (with grad) or frees them as it goes (under
no_grad), a backward pass on autograd's C++ thread (no Python frames) that
frees what forward saved, and an AdamW step looping over every parameter
(state made at the first step, a temporary per parameter). Frames are those
PyTorch records: the program's lines (/work/model.py, /work/train.py) under
torch.nn.Module's __call__ (torch/nn/modules/module.py), the optimizer's in
torch/optim, autograd's engine in C++.

Scenarios:
  forward     weights, one forward pass, dumped (activations live)
  step        weights, one training step (forward, backward, optimizer)
  steps       --iterations training steps; --leak keeps 1 MiB a step
              (train.py:44); --handoff moves one buffer a step from a pool
              made at the start (cache.py:10) to one made lazily
              (cache.py:20): a site grows, another shrinks, the total is flat
              --eval-leak keeps a validation forward's graph a step (its
              activations, under train.py:46); --backward-leak keeps a
              gradient made on autograd's thread a step
Options: --layers N, --params-per-layer N, --no-grad (forward without
saving), --annotations (ProfilerStep#N), --optimizer-annotation
(Optimizer.step#AdamW.step START/END), --seed N (layer sizes drawn around
the defaults), --no-frames.
"""
import random
import sys

# make_snapshots.py, as it runs (__main__ when run as a script): its SITES
# and Device are the ones in use.
ms = sys.modules.get('__main__') if hasattr(sys.modules.get('__main__'), 'Device') else __import__('make_snapshots')

MIB = ms.MIB
TORCH = '/usr/lib/python3/dist-packages/torch'


def py(name, path, line):
    return (name, path, line)


CALL = [py('_call_impl', TORCH + '/nn/modules/module.py', 1750),
        py('_wrapped_call_impl', TORCH + '/nn/modules/module.py', 1739)]
MAIN = [py('main', '/work/train.py', 90), py('<module>', '/work/train.py', 100)]
AUTOGRAD = [
    {'filename': '/pytorch/torch/csrc/autograd/engine.cpp', 'line': 1100,
     'name': 'torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, '
             'torch::autograd::Node*, torch::autograd::InputBuffer&)'},
    {'filename': '/pytorch/torch/csrc/autograd/engine.cpp', 'line': 600,
     'name': 'torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)'},
    {'filename': '??', 'line': 0, 'name': 'execute_native_thread_routine'},
    {'filename': '??', 'line': 0, 'name': 'start_thread'},
    {'filename': '??', 'line': 0, 'name': 'clone'},
]


def in_block(line, caller=40):
    """A line of Block.forward, called from Model.forward's loop, from train_step."""
    return ms.stack(py('forward', '/work/model.py', line), *CALL, py('forward', '/work/model.py', 60), *CALL,
                    py('train_step', '/work/train.py', caller), *MAIN)


def in_model(line, caller=40):
    return ms.stack(py('forward', '/work/model.py', line), *CALL, py('train_step', '/work/train.py', caller), *MAIN)


def in_adamw(line):
    return ms.stack(py('_single_tensor_adamw', TORCH + '/optim/adamw.py', line),
                    py('adamw', TORCH + '/optim/adamw.py', 300), py('step', TORCH + '/optim/adamw.py', 220),
                    py('wrapper', TORCH + '/optim/optimizer.py', 487), py('train_step', '/work/train.py', 43), *MAIN)


def backward(kernel):
    return ms.CPP + [{'filename': '/pytorch/aten/src/ATen/native/' + kernel + '.cpp', 'line': 77,
                      'name': 'at::native::' + kernel}] + AUTOGRAD


ms.SITES.update({
    'm_weight': ms.stack(py('__init__', '/work/model.py', 12), py('main', '/work/train.py', 80), MAIN[1]),
    'm_embed': in_model(55),
    'm_qkv': in_block(20), 'm_scores': in_block(21), 'm_attn': in_block(22), 'm_up': in_block(24),
    'm_down': in_block(25),
    'm_logits': in_model(65), 'm_loss': ms.stack(py('train_step', '/work/train.py', 41), *MAIN),
    'b_grad_in': backward('mm_backward'), 'b_grad_w': backward('accumulate_grad'),
    'o_state': in_adamw(120), 'o_tmp': in_adamw(400),
    'k_leak': ms.stack(py('train_step', '/work/train.py', 44), *MAIN),
    'h_pool': ms.stack(py('warm', '/work/cache.py', 10), py('main', '/work/train.py', 85), MAIN[1]),
    'h_lazy': ms.stack(py('refill', '/work/cache.py', 20), py('train_step', '/work/train.py', 45), *MAIN),
    'x_data': ms.stack(py('train_step', '/work/train.py', 39), *MAIN),
    # the same forward run for evaluation, from train.py:46
    'e_embed': in_model(55, 46), 'e_qkv': in_block(20, 46), 'e_scores': in_block(21, 46),
    'e_attn': in_block(22, 46), 'e_up': in_block(24, 46), 'e_down': in_block(25, 46),
    'e_logits': in_model(65, 46),
})


class Model:
    def __init__(self, dev, opt):
        self.dev, self.opt = dev, opt
        rng = random.Random(opt.seed)
        scale = (lambda: 1.0) if not opt.seed else (lambda: rng.uniform(0.6, 1.6))
        self.act = [int(MIB * scale()) // 4096 * 4096 + 4096 for _ in range(opt.layers)]
        self.params = [dev.alloc(MIB // 2 + 512 * (i % 7), 'm_weight')
                       for i in range(opt.layers * opt.params_per_layer + 2)]
        self.state = []    # AdamW's exp_avg, exp_avg_sq: made at the first step
        self.grads = []    # .grad of each parameter: made by the first backward, zeroed in place after
        self.saved = []    # per layer, what forward saved for backward
        self.kept_grads = []

    def forward(self, site='m_'):
        d, a = self.dev, self.act
        x = d.alloc(a[0], site + 'embed')
        self.saved = [[x]]
        for l in range(self.opt.layers):
            qkv = d.alloc(3 * a[l], site + 'qkv')
            scores = d.alloc(2 * a[l], site + 'scores')
            attn = d.alloc(a[l], site + 'attn')
            d.free(scores)
            up = d.alloc(2 * a[l], site + 'up')
            down = d.alloc(a[l], site + 'down')
            if self.opt.no_grad:   # nothing saved: each layer frees what it made but its output
                for p in (qkv, attn, up, x):
                    d.free(p)
                self.saved = [[down]]
            else:
                self.saved.append([qkv, attn, up, down])
            x = down
        self.logits = d.alloc(4 * a[-1], site + 'logits')
        return d.alloc(512, 'm_loss')

    def backward(self, loss):
        d = self.dev
        first = not self.grads
        d.free(self.logits)
        for i, layer in enumerate(reversed(self.saved)):
            g = d.alloc(2 * self.act[0], 'b_grad_in')
            for p in layer:
                d.free(p)
            if self.opt.backward_leak and i == 0:
                self.kept_grads.append(g)   # a gradient kept by a hook, on autograd's thread
            else:
                d.free(g)
        self.saved = []
        if first:
            self.grads = [d.alloc(MIB // 2 + 512 * (i % 7), 'b_grad_w') for i in range(len(self.params))]
        d.free(loss)

    def optimizer_step(self, annotations):
        d = self.dev
        if self.opt.optimizer_annotation:
            annotations.append({'name': 'Optimizer.step#AdamW.step', 'stage': 'START', 'time_us': d.tick(),
                                'device': d.ordinal})
        for i, _ in enumerate(self.params):
            size = MIB // 2 + 512 * (i % 7)
            if len(self.state) < 2 * len(self.params):
                self.state += [d.alloc(size, 'o_state'), d.alloc(size, 'o_state')]
            t = d.alloc(size, 'o_tmp')
            d.free(t)
        if self.opt.optimizer_annotation:
            annotations.append({'name': 'Optimizer.step#AdamW.step', 'stage': 'END', 'time_us': d.tick(),
                                'device': d.ordinal})



def run(dev, opt, annotations):
    m = Model(dev, opt)
    if opt.scenario == 'forward':
        m.forward()
        return
    pool = [dev.alloc(2 * MIB, 'h_pool') for _ in range(opt.iterations)] if opt.handoff else []
    kept, lazy = [], []
    steps = 1 if opt.scenario == 'step' else opt.iterations
    for it in range(steps):
        if opt.annotations:
            annotations.append({'name': f'ProfilerStep#{it}', 'stage': 'START', 'time_us': dev.tick(),
                                'device': dev.ordinal})
        batch = dev.alloc(MIB, 'x_data')
        loss = m.forward()
        m.backward(loss)
        m.optimizer_step(annotations)
        dev.free(batch)
        if opt.leak:
            kept.append(dev.alloc(MIB, 'k_leak'))
        if opt.eval_leak:   # a validation forward with grad, its loss kept: the graph stays
            kept.append(m.forward('e_'))
            kept.append(m.saved)
            kept.append(m.logits)
        if opt.handoff:   # one buffer of the pool handed to the lazy cache
            dev.free(pool.pop())
            lazy.append(dev.alloc(2 * MIB, 'h_lazy'))
        if opt.annotations:
            annotations.append({'name': f'ProfilerStep#{it}', 'stage': 'END', 'time_us': dev.tick(),
                                'device': dev.ordinal})
