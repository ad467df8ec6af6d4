"""The CPU speed-ups change how a step is computed, never what it computes."""

from __future__ import annotations

import torch
from tiny import tiny_model, tiny_tokenizer

from grpo_fast.models.cpu_speed import prefill_shared, shared_prompt_prefill


def _batch(tok, prompts):
    tok.padding_side = "left"
    return tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)


def test_shared_prefill_generates_the_same_tokens_as_a_full_prefill():
    tok = tiny_tokenizer()
    model = tiny_model(tok).eval()
    # two prompts of different lengths (left padding), each repeated as GRPO repeats a group
    batch = _batch(tok, ["What is 2 + 2?"] * 3 + ["Summarize the document about the park."] * 3)
    with torch.no_grad():
        plain = model.generate(**batch, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
        shared_prompt_prefill(model)
        calls = []
        model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(tuple(kwargs["input_ids"].shape)),
                                        with_kwargs=True)
        shared = model.generate(**batch, max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    assert torch.equal(plain, shared)
    width = batch["input_ids"].shape[1]
    assert calls[:2] == [(2, width - 1), (6, 1)]  # one prefill of the two distinct prompts, then decoding


def test_shared_prefill_computes_each_distinct_prompt_once():
    tok = tiny_tokenizer()
    model = tiny_model(tok).eval()
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[0]),
                                    with_kwargs=True)
    batch = _batch(tok, ["a b c d"] * 4 + ["e f g"] * 4)
    cache = prefill_shared(model, batch["input_ids"], batch["attention_mask"])
    assert seen == [2]  # one forward over the two distinct rows
    assert cache.get_seq_length() == batch["input_ids"].shape[1] - 1
    assert cache.layers[0].keys.shape[0] == 8  # expanded to every row of the batch
    assert prefill_shared(model, batch["input_ids"][::4], batch["attention_mask"][::4]) is None  # all distinct


def test_busy_aware_threads_leaves_busy_cores_alone():
    from grpo_fast.models.cpu_speed import busy_aware_threads

    assert busy_aware_threads(cores=2, busy=0.1) == 2  # idle: every core
    assert busy_aware_threads(cores=2, busy=1.2) == 1
    assert busy_aware_threads(cores=2, busy=7.0) == 1  # never fewer than one
    assert busy_aware_threads(cores=16, busy=4.0) == 12


def test_busy_cores_reads_a_share_of_the_machine():
    import os

    from grpo_fast.models.cpu_speed import busy_cores

    assert 0.0 <= busy_cores(window=0.2) <= (os.cpu_count() or 1) + 1e-9


def _lora(model):
    from peft import LoraConfig, get_peft_model

    # random B (init_lora_weights=False): the adapter really changes the model, as after some training
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False))


def test_merged_generation_scores_like_the_adapter_and_leaves_the_trained_weights_alone():
    from grpo_fast.models.cpu_speed import merged_lora_generation

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    model = _lora(tiny_model(tok)).eval()
    batch = _batch(tok, ["What is 2 + 2?"] * 2 + ["Summarize the document about the park."] * 2)
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id, output_scores=True,
                  return_dict_in_generate=True)
    with torch.no_grad():
        plain = model.generate(**batch, **kwargs)
        with model.disable_adapter():
            base = model.generate(**batch, **kwargs)
    weights = {n: p for n, p in model.named_parameters()}
    before = {n: p.detach().clone() for n, p in weights.items()}
    assert merged_lora_generation(model)
    assert merged_lora_generation(model)  # a second stage on the same model: installed once, not merged twice
    lora_calls = []
    for name, module in model.named_modules():
        if name.endswith("lora_A.default"):
            module.register_forward_hook(lambda *a: lora_calls.append(1))
    with torch.no_grad():
        merged = model.generate(**batch, **kwargs)
    assert lora_calls == []  # the adapter's own matmuls did not run: the merged copies did the work
    assert torch.equal(plain.sequences, merged.sequences)
    assert torch.allclose(torch.stack(plain.scores), torch.stack(merged.scores), atol=1e-4)
    assert not torch.allclose(torch.stack(base.scores), torch.stack(merged.scores), atol=1e-2)  # adapter applied
    after = dict(model.named_parameters())
    assert all(after[n] is weights[n] and torch.equal(after[n], before[n]) for n in weights)  # same tensors, values
    assert all(p.requires_grad == ("lora_" in n) for n, p in after.items())
    q_proj = model.base_model.model.model.layers[0].self_attn.q_proj
    assert model.active_adapters == ["default"] and not q_proj.disable_adapters  # the adapter is back on


def test_merged_generation_declines_what_it_cannot_merge():
    from peft import LoraConfig, get_peft_model

    from grpo_fast.models.cpu_speed import merged_lora_generation

    tok = tiny_tokenizer()
    dora = get_peft_model(tiny_model(tok), LoraConfig(r=4, target_modules="all-linear", use_dora=True))
    assert not merged_lora_generation(dora)
    assert not merged_lora_generation(tiny_model(tok))  # no adapter at all


def _grpo_batch(tok):
    """Two prompts of different lengths (left padding), each with three completions (right padding), as TRL
    concatenates them for the training forward; returns ids, mask and the completion width."""
    prompts = _batch(tok, ["What is 2 + 2?"] * 3 + ["Summarize the document about the park."] * 3)
    tok.padding_side = "right"
    done = tok(["4", "four", "It is 4", "A park.", "Trees and a pond", "Nice"], return_tensors="pt", padding=True,
               add_special_tokens=False)
    ids = torch.cat([prompts["input_ids"], done["input_ids"]], dim=1)
    mask = torch.cat([prompts["attention_mask"], done["attention_mask"]], dim=1)
    return ids, mask, done["input_ids"].shape[1]


def test_shared_prompt_training_forward_gives_the_same_logits_and_gradients():
    from grpo_fast.models.cpu_speed import shared_prompt_training_forward

    tok = tiny_tokenizer()
    torch.manual_seed(0)
    model = _lora(tiny_model(tok)).train()
    ids, mask, width = _grpo_batch(tok)
    weights = torch.randn(ids.shape[0], width + 1)

    def logits_and_grads():
        model.zero_grad()
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=width + 1, use_cache=False).logits
        (torch.log_softmax(logits, -1).amax(-1) * weights).sum().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}

    plain_logits, plain_grads = logits_and_grads()
    shared_prompt_training_forward(model)
    rows = []
    model.get_base_model().model.register_forward_pre_hook(
        lambda module, args, kwargs: rows.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    shared_logits, shared_grads = logits_and_grads()
    prompt_width = ids.shape[1] - width - 1
    assert rows == [(2, prompt_width), (6, width + 1)]  # each distinct prompt once, then the completions
    assert shared_logits.shape == plain_logits.shape
    assert torch.allclose(plain_logits, shared_logits, atol=1e-5)
    assert plain_grads.keys() == shared_grads.keys() and len(plain_grads) > 0
    assert all(torch.allclose(plain_grads[n], shared_grads[n], atol=1e-5, rtol=1e-4) for n in plain_grads)


def test_shared_prompt_training_forward_leaves_other_calls_alone():
    from grpo_fast.models.cpu_speed import shared_prompt_training_forward

    tok = tiny_tokenizer()
    model = _lora(tiny_model(tok)).eval()
    ids, mask, width = _grpo_batch(tok)
    with torch.no_grad():
        before = model(input_ids=ids[::3], attention_mask=mask[::3], logits_to_keep=width + 1).logits
        shared_prompt_training_forward(model)
        after = model(input_ids=ids[::3], attention_mask=mask[::3], logits_to_keep=width + 1).logits  # all distinct
        plain = model(input_ids=ids, attention_mask=mask).logits  # no logits_to_keep: not TRL's scoring call
    assert torch.equal(before, after) and plain.shape[1] == ids.shape[1]
