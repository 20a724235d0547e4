#!/usr/bin/env python3
"""Dev perplexity of the average of the last 1..MAX checkpoints (weights rounded to F16 as exported), to choose
export.py --last N. Usage: tools/.venv/bin/python tools/train/dev_average.py [WORK] [MAX] [DEVICE] (from the
repository root; WORK defaults to .train, MAX, the most checkpoints averaged, to 4, DEVICE to cpu: cuda on a GPU
machine, where it takes seconds)."""
import argparse
import glob
import math
import sys

import torch
sys.path.insert(0, 'tools/train'); import train as T
from transformers import MarianMTModel
torch.set_num_threads(2)
W = sys.argv[1] if len(sys.argv) > 1 else '.train'
MAX = int(sys.argv[2]) if len(sys.argv) > 2 else 4
DEV = sys.argv[3] if len(sys.argv) > 3 else 'cpu'
d = T.load_data(W); pad, V = d['pad'], d['vocab_size']; ds, dt = d['dev']
cks = sorted(glob.glob(W + '/ckpt/ckpt-*.pt'), key=lambda p: int(p.split('-')[-1][:-3]))
sds = [torch.load(p, weights_only=False, map_location='cpu')['model'] for p in cks[-MAX:]]
args = argparse.Namespace(**torch.load(cks[-1], weights_only=False)['args'])
m = MarianMTModel(T.model_config(V, pad, args)).to(DEV); m.eval()
for n in range(1, len(sds) + 1):
    avg = {k: sum(sd[k].double() for sd in sds[-n:]) / n if sds[-1][k].is_floating_point() else sds[-1][k] for k in sds[-1]}
    m.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in avg.items()}); m.half().float()
    tot = cnt = 0
    with torch.no_grad():
        for b in T.make_batches(ds, dt, 8192, 0):
            x, a, dd, y = (t.to(DEV) for t in T.collate(b, ds, dt, pad))
            lg = m(input_ids=x, attention_mask=a, decoder_input_ids=dd).logits
            tot += torch.nn.functional.cross_entropy(lg.view(-1, V), y.view(-1), ignore_index=-100, reduction='sum').item(); cnt += (y != -100).sum().item()
    print(n, 'last ckpts: dev loss', round(tot / cnt, 4), 'ppl', round(math.exp(tot / cnt), 3), flush=True)
