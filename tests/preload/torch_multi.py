"""PyTorch under cudalloc with other tools, for scripts/gpu-check.sh (run
under the preload with PYTORCH_NO_CUDA_MEMORY_CACHING=1):
  ipc        a CUDA tensor sent to another process (torch.multiprocessing),
             changed there, the change seen here
  profiler   torch.profiler records the kernels while cudalloc runs
  peer       two GPUs: a tensor of GPU 0 copied and used on GPU 1
Prints one line per check."""
import sys

import torch
import torch.multiprocessing as mp


def child(q, done):
    t = q.get()
    ok = bool((t == 7).all())
    t.add_(1)
    torch.cuda.synchronize()
    done.put(ok)


def ipc():
    mp.set_start_method("spawn")
    q, done = mp.Queue(), mp.Queue()
    t = torch.full((1 << 20,), 7.0, device="cuda")
    keep = torch.zeros(3 << 20, device="cuda")  # another tensor beside it: the child must not see it
    p = mp.Process(target=child, args=(q, done))
    p.start()
    q.put(t)
    ok = done.get(timeout=120)
    p.join(timeout=120)
    print(f"torch ipc: child read the tensor: {ok}, its write seen: {bool((t == 8).all())}, exit {p.exitcode}")
    del keep


def profiler():
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(2048, 2048, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            y = x @ x
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"torch profiler: {len(kernels)} GPU events recorded")


def peer():
    if torch.cuda.device_count() < 2:
        print("torch peer: 1 GPU: skipped")
        return
    a = torch.arange(1 << 22, device="cuda:0", dtype=torch.float32)
    b = a.to("cuda:1")  # PyTorch enables peer access for this copy
    c = (b * 2).to("cuda:0")
    torch.cuda.synchronize()
    print(f"torch peer: copies between GPUs right: {bool((c == a * 2).all())}")


{"ipc": ipc, "profiler": profiler, "peer": peer}[sys.argv[1]]()
