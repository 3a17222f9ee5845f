"""hf_rank.py - one rank (or, with --reference, one process on the global
batch) of a Hugging Face causal LM built from its config (random init, no
hub access) trained through zshard.torch as a user would: each decoder
layer fully_shard'ed, AdamW in two groups (no decay on norms and biases)
and a LambdaLR warmup, gradient checkpointing on request.
tests/python/test_hf.py runs it.

  hf_rank.py --model gpt2|llama --job NAME --runs 3,2,1[,3n,3m] --steps N --out PREFIX
             [--reference --world W] [--pretrained DIR]
  hf_rank.py --model gpt2 --job NAME --trainer --world W --steps N --out PREFIX [--reference]
"""
import argparse
import os
import sys

import torch
from safetensors.torch import save_file

SEQ, BATCH, VOCAB = 16, 2, 96


def build(kind):
    import transformers as tf
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=48, n_layer=3, n_head=4,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        m = tf.GPT2LMHeadModel(cfg)
        return m, m.transformer.h
    cfg = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=48, intermediate_size=96,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, tie_word_embeddings=False)
    m = tf.LlamaForCausalLM(cfg)
    return m, m.model.layers


def groups(m):
    decay = [p for n, p in m.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in m.named_parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]


def batch(rank, step):
    g = torch.Generator().manual_seed(7919 * step + rank)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def lam(step):
    return min(1.0, (step + 1) / 3)


def mixed(model):
    """bf16 weights, fp32 norms (as Hugging Face checkpoints often keep
    them), computed under CPU autocast."""
    model.to(torch.bfloat16)
    for m in model.modules():
        if type(m).__name__.endswith(("RMSNorm", "LayerNorm")):
            m.float()


def reference_mixed(a, model):
    """The mixed-precision reference of zshard's semantics: fp32 masters,
    each rank's gradient from the model in its dtypes on its own batch,
    their fp32 mean, torch.optim.AdamW on the masters, the parameters
    the masters rounded to their dtypes."""
    named = dict(model.named_parameters())
    masters = {n: p.detach().float().clone().requires_grad_(True) for n, p in named.items()}
    opt = torch.optim.AdamW([{"params": [masters[n] for n, p in named.items() if p.dim() >= 2],
                              "weight_decay": 0.1},
                             {"params": [masters[n] for n, p in named.items() if p.dim() < 2],
                              "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    losses = []
    for step in range(a.steps):
        acc = {n: torch.zeros_like(m) for n, m in masters.items()}
        total = 0.0
        for r in range(a.world):
            with torch.no_grad():
                for n, p in named.items():
                    p.copy_(masters[n])
            ids = batch(r, step)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            for n, p in named.items():
                acc[n] += p.grad.float()
                p.grad = None
            total += loss.item()
        for n, m in masters.items():
            m.grad = acc[n] / a.world
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(total / a.world)
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(masters[n])
    return losses


def train(a, run, rank):
    """One run: RUN is a stage (1-3), 'n' after it without gradient
    checkpointing, 'm' mixed precision (bf16 weights, fp32 norms, CPU
    autocast); returns the state dict and each step's loss."""
    stage, checkpointing = int(run[0]), not run.endswith("n")
    model, layers = build(a.model)
    if run.endswith("m"):
        mixed(model)
    if checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    if a.reference and run.endswith("m"):
        losses = reference_mixed(a, model)
        return {n: t.detach().float().clone() for n, t in model.state_dict().items()}, losses
    if not a.reference:
        import zshard.torch as zt
        for layer in layers:
            zt.fully_shard(layer)
        zt.fully_shard(model, job="%s-%s" % (a.job, run), stage=stage)
        opt = zt.AdamW(groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    else:
        opt = torch.optim.AdamW(groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    losses = []
    for step in range(a.steps):
        if a.reference:  # the world's batches as one
            ids = torch.cat([batch(r, step) for r in range(a.world)])
        else:
            ids = batch(rank, step)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=run.endswith("m")):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.item())
    sd = {n: t.detach().float().clone() for n, t in model.state_dict().items()}
    if rank == 0 and a.pretrained and run == a.runs.split(",")[0]:
        import zshard.torch as zt  # the Hugging Face directory from_pretrained loads
        zt.save_pretrained(model, a.pretrained, max_shard_size="40KB")
    if not a.reference:
        model.zshard_close()
    return sd, losses


def trainer(a, rank):
    """Hugging Face Trainer at this rank of a.world (torchrun's environment:
    with --reference, the same Trainer in one process on the global batch,
    torch.optim.AdamW;
    Accelerate runs a gloo process group, zshard.torch keeps it from
    wrapping the model in DDP), GPT-2 at ZeRO-3 without gradient
    checkpointing, AdamW in two groups and the LambdaLR passed in, no
    clipping. The dataset is laid out so that the sequential sampler,
    sharded by Accelerate (rank r takes the global batches r, r + W, ...),
    gives rank r at step s exactly batch(r, s), the reference's. Returns
    the state dict, the losses Trainer logged and the sample indices this
    rank read."""
    import transformers as tf
    model, layers = build(a.model)
    if a.reference:  # the same Trainer in one process on the global batch
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
            os.environ.pop(k, None)
        opt = torch.optim.AdamW(groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    else:
        import zshard.torch as zt
        for layer in layers:
            zt.fully_shard(layer)
        zt.fully_shard(model, job="%s-trainer" % a.job, stage=3)
        # Trainer asks for the norm every step (clip_grad_norm_ at inf, to
        # log it): the servers compute it when the optimizer's
        # max_grad_norm is set, and at inf they scale by exactly 1
        opt = zt.AdamW(groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8,
                       max_grad_norm=float("inf"))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    per = BATCH * a.world if a.reference else BATCH
    seen = []

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return a.steps * a.world * BATCH

        def __getitem__(self, i):
            seen.append(i)
            s, r, row = i // (a.world * BATCH), (i // BATCH) % a.world, i % BATCH
            ids = batch(r, s)[row]
            return {"input_ids": ids, "labels": ids}

    class InOrder(tf.Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    args = tf.TrainingArguments(output_dir=a.out + "-trainer", per_device_train_batch_size=per,
                                max_steps=a.steps, max_grad_norm=0.0, logging_steps=1,
                                save_strategy="no", report_to=[], use_cpu=True, seed=0,
                                disable_tqdm=True, dataloader_num_workers=0)
    t = InOrder(model=model, args=args, train_dataset=Data(), optimizers=(opt, sched))
    t.train()
    wrapped = "itself" if t.model_wrapped is model else type(t.model_wrapped).__name__
    losses = [(h["loss"], h["grad_norm"]) for h in t.state.log_history if "loss" in h]
    sd = {n: v.detach().float().clone() for n, v in model.state_dict().items()}
    if not a.reference:
        model.zshard_close()
    return sd, losses, seen, wrapped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--job", default="hf")
    ap.add_argument("--runs", default="3", help="stages, in turn: 3,2,1,3n,3m ('n': no "
                    "gradient checkpointing, 'm': mixed precision)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--out", required=True, help="rank 0 writes OUT-RUN.safetensors")
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--pretrained", default=None, help="rank 0 saves the first run there")
    ap.add_argument("--trainer", action="store_true", help="a Hugging Face Trainer at this "
                    "rank of --world (GPT-2, ZeRO-3, no checkpointing) instead of --runs")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    if a.trainer:
        sd, losses, seen, wrapped = trainer(a, rank)
        if rank == 0:
            save_file(sd, "%s-trainer.safetensors" % a.out)
        print("rank %d run trainer: losses %s" % (rank, " ".join(repr(x) for x, _ in losses)))
        print("rank %d run trainer: grad norms %s" % (rank, " ".join(repr(n) for _, n in losses)))
        print("rank %d read samples %s; the model Trainer trained: %s"
              % (rank, " ".join(str(i) for i in seen), wrapped), flush=True)
        return 0
    for run in a.runs.split(","):
        sd, losses = train(a, run, rank)
        if rank == 0:
            save_file(sd, "%s-%s.safetensors" % (a.out, run))
        print("rank %d run %s: losses %s" % (rank, run, " ".join(repr(x) for x in losses)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
