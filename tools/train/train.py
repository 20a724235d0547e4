#!/usr/bin/env python3
"""Stage 3: train the Marian Transformer in PyTorch (transformers' MarianMTModel), resumable.

The model is a MarianMTModel built from a MarianConfig (Marian's conventions: sinusoidal positions with sin in
the first half of the columns, swish, scaled embeddings, one embedding matrix shared by encoder, decoder and the
output layer, pad = last id = decoder start, eos 0). Loss: cross-entropy with label smoothing 0.1; Adam
(0.9, 0.98, 1e-9) with linear warm-up and inverse-square-root decay; batches of about --batch-tokens target
tokens (sentences of similar length, batch order shuffled per epoch with a fixed seed); bf16 autocast on CPU
(--bf16, default on) or CUDA.

Every --ckpt-minutes a checkpoint WORK/ckpt/ckpt-STEP.pt (model, optimizer, step, epoch, batch position, RNG)
is written and the newest --keep are kept; a run resumes from the newest automatically. --minutes bounds the
wall-clock time of this run (the process saves and exits when it is spent).

--init DIR starts a run without checkpoint from a model directory's weights (its architecture); with --grow the
model gets the --layers / --dec-layers of the command line and each new layer starts as a copy of one of DIR's
layers (grow_state; README, stage 3h). --cooldown N ends a model's training: the learning rate falls linearly to
zero over N steps from where the run starts, and the run stops there.

Usage: nice -n 10 tools/.venv/bin/python tools/train/train.py --minutes 60 [--layers 3] [--work .train]
"""
import argparse
import glob
import json
import math
import os
import random
import re
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def model_config(vocab_size, pad, a):
    from transformers import MarianConfig
    return MarianConfig(
        vocab_size=vocab_size, decoder_vocab_size=vocab_size, d_model=a.d_model,
        encoder_layers=a.layers, decoder_layers=a.dec_layers or a.layers,
        encoder_attention_heads=a.heads, decoder_attention_heads=a.heads,
        encoder_ffn_dim=a.ffn, decoder_ffn_dim=a.ffn, activation_function="swish",
        max_position_embeddings=256, scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad,
        forced_eos_token_id=0, bos_token_id=None, dropout=a.dropout, attention_dropout=0.0,
        activation_dropout=0.0, init_std=0.02, num_beams=4, max_length=256,
        bad_words_ids=[[pad]])


def encode_file(sp, vocab, path, max_len=255):
    """MarianTokenizer's ids: spm pieces -> vocab.json ids (unk 1), truncated, + </s> (0)."""
    with open(path, encoding="utf-8") as f:
        lines = [x.rstrip("\n") for x in f]
    out = []
    for pieces in sp.encode(lines, out_type=str):
        ids = [vocab.get(p, 1) for p in pieces][:max_len - 1] + [0]
        out.append(ids)
    return out


def direction(work):
    """(source, target) language codes of WORK: the corpus files are WORK/corpus/{split}.{code}, and
    WORK/direction.json ({"src": "de", "tgt": "en"}, written by reverse.py) says which side is the source.
    Without the file: English to German."""
    p = os.path.join(work, "direction.json")
    if not os.path.exists(p):
        return "en", "de"
    with open(p) as f:
        d = json.load(f)
    return d["src"], d["tgt"]


def load_data(work):
    os.makedirs(os.path.join(work, "ckpt"), exist_ok=True)
    cache = os.path.join(work, "ckpt", "data.pt")
    src_lang, tgt_lang = direction(work)
    if os.path.exists(cache):
        d = torch.load(cache)
        if d.get("direction", ["en", "de"]) != [src_lang, tgt_lang]:
            raise SystemExit(f"{cache} holds {d.get('direction')} data, the work directory is {src_lang}-{tgt_lang}; "
                             "remove the cache")
        return d
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(work, "spm", "joint.spm"))
    with open(os.path.join(work, "spm", "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    c = os.path.join(work, "corpus")
    d = {"vocab_size": len(vocab), "pad": vocab["<pad>"], "direction": [src_lang, tgt_lang]}
    for split in ("train", "dev"):
        d[split] = (encode_file(sp, vocab, os.path.join(c, f"{split}.{src_lang}")),
                    encode_file(sp, vocab, os.path.join(c, f"{split}.{tgt_lang}")))
    torch.save(d, cache)
    return d


def make_batches(src, tgt, batch_tokens, seed):
    """Sentences sorted by (target, source) length inside shuffled chunks, cut into batches of about
    batch_tokens padded target tokens; the batch order shuffled. Deterministic in seed."""
    rng = random.Random(seed)
    idx = list(range(len(src)))
    rng.shuffle(idx)
    batches = []
    chunk = 100 * 64
    for c0 in range(0, len(idx), chunk):
        part = sorted(idx[c0:c0 + chunk], key=lambda i: (len(tgt[i]), len(src[i])))
        cur, mx = [], 0
        for i in part:
            m = max(mx, len(tgt[i]) + 1, len(src[i]))
            if cur and m * (len(cur) + 1) > batch_tokens:
                batches.append(cur)
                cur, m = [], max(len(tgt[i]) + 1, len(src[i]))
            cur.append(i)
            mx = m
        if cur:
            batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(ids, src, tgt, pad):
    S = max(len(src[i]) for i in ids)
    T = max(len(tgt[i]) for i in ids)
    x = torch.full((len(ids), S), pad, dtype=torch.long)
    labels = torch.full((len(ids), T), -100, dtype=torch.long)
    dec = torch.full((len(ids), T), pad, dtype=torch.long)
    for r, i in enumerate(ids):
        s, t = src[i], tgt[i]
        x[r, :len(s)] = torch.tensor(s)
        labels[r, :len(t)] = torch.tensor(t)
        dec[r, 1:len(t)] = torch.tensor(t[:-1])  # decoder start = pad
    return x, (x != pad).long(), dec, labels


def layer_map(old, new, how):
    """Which layer of an init model with `old` layers starts each of `new` layers: "spread" (layer i <- old
    layer floor(i * old / new): each old layer becomes a run of neighbours, the top one stays on top) or
    "stack" (i <- i mod old: the old stack repeated)."""
    if how == "stack":
        return [i % old for i in range(new)]
    return [i * old // new for i in range(new)]


def grow_state(sd, old_enc, old_dec, new_enc, new_dec, how):
    """The state dict of a MarianMTModel with new_enc + new_dec layers from sd (old_enc + old_dec layers, same
    d_model / heads / ffn / vocabulary): every tensor that is not per layer is kept, and layer i of each side
    is a copy of layer layer_map(old, new, how)[i] of that side. Returns (state dict, {side: mapping})."""
    per_layer = re.compile(r"^model\.(encoder|decoder)\.layers\.(\d+)\.(.+)$")
    out, layers = {}, {"encoder": {}, "decoder": {}}
    for k, v in sd.items():
        m = per_layer.match(k)
        if m:
            layers[m.group(1)].setdefault(int(m.group(2)), {})[m.group(3)] = v
        else:
            out[k] = v
    maps = {}
    for side, old, new in (("encoder", old_enc, new_enc), ("decoder", old_dec, new_dec)):
        maps[side] = layer_map(old, new, how)
        for i, j in enumerate(maps[side]):
            for rest, v in layers[side][j].items():
                out[f"model.{side}.layers.{i}.{rest}"] = v.clone()
    return out, maps


def lr_at(step, a, rewarm_from=0, cool=None):
    """Warm-up then inverse square root; a continued run (--continue) ramps up again over --rewarm steps from
    the step it started at, since its Adam moments start from zero. cool = (first step, steps): the cool-down of
    --cooldown, a straight line from the schedule's value at its first step down to zero (times the ramp of a
    continued run that cools from its first step)."""
    step = max(step, 1)
    at = min(step, cool[0]) if cool else step
    at = max(at, 1)
    lr = a.lr * min(at / a.warmup, math.sqrt(a.warmup / at))
    if cool and step > cool[0]:
        lr *= max(0.0, 1.0 - (step - cool[0]) / cool[1])
    if rewarm_from and a.rewarm > 0:
        lr *= min(1.0, (step - rewarm_from) / a.rewarm)
    return lr


def latest_ckpt(d):
    cks = sorted(glob.glob(os.path.join(d, "ckpt-*.pt")), key=lambda p: int(p.split("-")[-1][:-3]))
    return cks[-1] if cks else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train"))
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dec-layers", type=int, default=0)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--keep", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--init", help="a model directory (same architecture and vocabulary, or fewer layers with --grow) whose weights start a "
                    "run that has no checkpoint yet, e.g. models/en-de for the German->English model")
    ap.add_argument("--grow", choices=["spread", "stack"],
                    help="with --init: the new model has --layers / --dec-layers layers (d_model, heads, ffn and "
                    "vocabulary of the init model); each new layer starts as a copy of an init layer: spread = "
                    "layer i <- floor(i * L_old / L_new), stack = i <- i mod L_old (per side)")
    ap.add_argument("--continue", dest="cont", action="store_true",
                    help="with --init (no --grow): go on with the run that exported DIR: step, epoch and batch "
                    "position of its newest averaged checkpoint and its lr, warm-up, seed and batch tokens "
                    "(DIR/averaged.json), so the learning-rate schedule and the data order continue where it "
                    "stopped; Adam's moments start afresh, so the learning rate ramps up again over --rewarm steps")
    ap.add_argument("--rewarm", type=int, default=100)
    ap.add_argument("--cooldown", type=int, default=0,
                    help="end the run with a cool-down: from the step this run starts at, the learning rate falls "
                    "in a straight line to zero over this many steps, and the run stops there (checkpoints keep "
                    "the cool-down, so a resumed run goes on with it whatever its command line says)")
    ap.add_argument("--cooldown-minutes", type=float, default=0.0,
                    help="a cool-down sized by time (for a machine whose pace is not known beforehand, a GPU): "
                    "when this many minutes of --minutes are left (and 20 steps have set a pace), the cool-down "
                    "starts, over as many steps as the run's pace so far (checkpoints and dev evaluations "
                    "included) fits in the time left")
    a = ap.parse_args()
    if a.grow and not a.init:
        raise SystemExit("--grow needs --init")
    if a.cont and (not a.init or a.grow):
        raise SystemExit("--continue needs --init and no --grow")
    t_start = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    from transformers import MarianMTModel
    ck_dir = os.path.join(a.work, "ckpt")
    os.makedirs(ck_dir, exist_ok=True)
    data = load_data(a.work)
    pad, V = data["pad"], data["vocab_size"]
    src, tgt = data["train"]
    dsrc, dtgt = data["dev"]

    path = latest_ckpt(ck_dir)
    if path:
        ck = torch.load(path, weights_only=False)
        # the architecture, schedule and data order of the run resumed, whatever this command line says
        for k in ("layers", "dec_layers", "d_model", "heads", "ffn", "dropout", "lr", "warmup", "seed",
                  "batch_tokens", "label_smoothing", "rewarm"):
            if k in ck["args"]:
                setattr(a, k, ck["args"][k])
    if not path and a.init:  # warm start: the architecture of the model directory
        init = MarianMTModel.from_pretrained(a.init, dtype=torch.float32)
        c = init.config
        if a.grow:  # the layer counts of the command line, the rest of the init model
            a.dec_layers = a.dec_layers or a.layers
        else:
            a.layers, a.dec_layers = c.encoder_layers, c.decoder_layers
        a.d_model, a.heads, a.ffn = c.d_model, c.encoder_attention_heads, c.encoder_ffn_dim
    model = MarianMTModel(model_config(V, pad, a)).to(a.device)
    if not path and a.init:
        if a.grow:
            sd, maps = grow_state(init.state_dict(), c.encoder_layers, c.decoder_layers, a.layers, a.dec_layers,
                                  a.grow)
            model.load_state_dict(sd)
            print(f"grown from {a.init} ({c.encoder_layers}+{c.decoder_layers} -> {a.layers}+{a.dec_layers} layers, "
                  f"{a.grow}): new layer <- init layer: " +
                  "; ".join(f"{side} " + ", ".join(f"{i}<-{j}" for i, j in enumerate(m)) for side, m in maps.items()),
                  flush=True)
        else:
            model.load_state_dict(init.state_dict())
            print(f"initialised from {a.init}", flush=True)
        del init
    # on a GPU one fused kernel for the whole update instead of a few per tensor (the small model's step is
    # launches, not arithmetic); the state is the same as the plain Adam's, so checkpoints move between them
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-9,
                           **({"fused": True} if a.device.startswith("cuda") else {}))
    step, epoch, pos, elapsed, rewarm_from, cool = 0, 0, 0, 0.0, 0, None
    if not path and a.cont:
        with open(os.path.join(a.init, "averaged.json")) as f:
            rec = json.load(f)
        last = rec["averaged_checkpoints"][-1]
        if "pos" not in last or "train_args" not in rec:
            raise SystemExit(f"--continue: {a.init}/averaged.json has no batch position or train_args "
                             "(exported before export.py recorded them)")
        for k in ("lr", "warmup", "seed", "batch_tokens"):
            setattr(a, k, rec["train_args"][k])
        step, epoch, pos, elapsed = last["step"], last["epoch"], last["pos"], last.get("trained_min", 0) * 60
        rewarm_from = step
        torch.manual_seed(a.seed)  # dropout's stream from the recorded seed, not the command line's
        print(f"continuing {a.init}'s run: step {step} epoch {epoch} batch {pos}, lr {a.lr} warm-up {a.warmup} "
              f"seed {a.seed}, {a.batch_tokens} tokens a batch; learning rate ramps up again over {a.rewarm} "
              "steps", flush=True)
    if path:
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, epoch, pos, elapsed = ck["step"], ck["epoch"], ck["pos"], ck.get("elapsed", 0.0)
        torch.set_rng_state(ck["rng"])
        rewarm_from = ck.get("rewarm_from", 0)
        cool = tuple(ck["cool"]) if ck.get("cool") else None
        print(f"resumed {path}: step {step} epoch {epoch} batch {pos} ({elapsed / 60:.1f} min trained)", flush=True)
    if a.cooldown > 0 and not cool:
        cool = (step, a.cooldown)
        print(f"cool-down: lr {lr_at(step, a):.2e} at step {step} falls to zero at step "
              f"{step + a.cooldown}", flush=True)
    nparam = sum(p.numel() for p in model.parameters())
    print(f"model: {a.layers}+{a.dec_layers or a.layers} layers d{a.d_model} ffn{a.ffn}, {nparam / 1e6:.2f} M params; "
          f"train {len(src)} pairs {'-'.join(data.get('direction', ['en', 'de']))}; device {a.device}", flush=True)
    lossf = torch.nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=a.label_smoothing)
    cuda = a.device.startswith("cuda")
    ac = torch.autocast(a.device.split(":")[0], dtype=torch.bfloat16, enabled=bool(a.bf16))
    log = open(os.path.join(a.work, "train.log"), "a")

    def dev_loss():
        model.eval()
        tot, n = 0.0, 0
        with torch.no_grad(), ac:
            for b in make_batches(dsrc, dtgt, 8192, 0):
                x, m, d, y = (t.to(a.device) for t in collate(b, dsrc, dtgt, pad))
                logits = model(input_ids=x, attention_mask=m, decoder_input_ids=d).logits.float()
                tot += torch.nn.functional.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=-100,
                                                         reduction="sum").item()
                n += (y != -100).sum().item()
        model.train()
        return tot / n

    def save(tag=""):
        p = os.path.join(ck_dir, f"ckpt-{step}.pt")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "epoch": epoch, "pos": pos,
                    "elapsed": elapsed + time.time() - t_run, "rng": torch.get_rng_state(), "args": vars(a),
                    "rewarm_from": rewarm_from, "cool": list(cool) if cool else None},
                   p + ".tmp")
        os.replace(p + ".tmp", p)
        cks = sorted(glob.glob(os.path.join(ck_dir, "ckpt-*.pt")), key=lambda q: int(q.split("-")[-1][:-3]))
        for q in cks[:-a.keep]:
            os.remove(q)
        dl = dev_loss()
        msg = json.dumps({"time": time.strftime("%H:%M:%S"), "step": step, "epoch": epoch, "pos": pos,
                          "trained_min": round((elapsed + time.time() - t_run) / 60, 1), "dev_loss": round(dl, 4),
                          "dev_ppl": round(math.exp(dl), 2), "ckpt": os.path.basename(p), "tag": tag})
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    model.train()
    t_run = time.time()
    step_run = step
    t_ck = time.time()
    deadline = t_start + a.minutes * 60
    tok_acc, t_acc, loss_acc, n_acc = 0, time.time(), 0.0, 0
    done = False
    while not done:
        batches = make_batches(src, tgt, a.batch_tokens, a.seed + epoch)
        while pos < len(batches):
            b = batches[pos]
            x, m, d, y = (t.pin_memory().to(a.device, non_blocking=True) if cuda else t
                          for t in collate(b, src, tgt, pad))
            for g in opt.param_groups:
                g["lr"] = lr_at(step + 1, a, rewarm_from, cool)
            with ac:
                logits = model(input_ids=x, attention_mask=m, decoder_input_ids=d).logits
            loss = lossf(logits.float().view(-1, V), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            pos += 1
            ntok = (y != -100).sum()  # tensors: no wait for the device until a log line
            tok_acc += ntok
            loss_acc += loss.detach() * ntok
            n_acc += ntok
            if step % a.log_every == 0:
                dt = time.time() - t_acc
                print(f"step {step} epoch {epoch} {pos}/{len(batches)} loss {float(loss_acc / n_acc):.3f} "
                      f"lr {lr_at(step, a, rewarm_from, cool):.2e} {float(tok_acc) / dt:.0f} tgt tok/s", flush=True)
                tok_acc, t_acc, loss_acc, n_acc = 0, time.time(), 0.0, 0
            now = time.time()
            if (a.cooldown_minutes > 0 and not cool and now >= deadline - a.cooldown_minutes * 60
                    and step - step_run >= 20):  # a pace of at least 20 steps, over the time actually left
                pace = (step - step_run) / (now - t_run)
                cool = (step, max(1, int(pace * min(a.cooldown_minutes * 60, deadline - now))))
                print(f"cool-down: lr {lr_at(step, a, rewarm_from):.2e} at step {step} falls to zero at step "
                      f"{step + cool[1]} ({pace:.1f} steps/s so far)", flush=True)
            if (a.max_steps and step >= a.max_steps) or (cool and step >= cool[0] + cool[1]):
                done = True
                break
            if time.time() >= deadline:
                done = True
                break
            if time.time() - t_ck >= a.ckpt_minutes * 60:
                save()
                t_ck = time.time()
        if not done:
            epoch += 1
            pos = 0
    save("final")


if __name__ == "__main__":
    main()
