"""The chapters' reference code: what each lab's learner writes, done carefully.

``basic`` (chapter 01), ``granularity`` (02), ``bpe`` (03–05) and its ``merge_stepper`` widget (03),
``specials`` (06), ``templates`` (07), ``vocabsize`` (08), ``pitfalls`` and ``vocab_files`` (09),
``patches`` (10), ``gguf_view`` (13: the file's layout, what byte N belongs to), ``tokenizer_view`` (14),
``quant_view`` and ``quantcost`` (15: what re-quantizing SmolLM2 costs its predictions), ``forward_view``
(16: attention patterns, the logit lens), ``generation_view`` (17: the sampler stages drawn, a stop-string
trace, the chat widget) and ``speed_view`` (18); labs 13–17 are graded against the engine itself. A lab's
hidden suite grades a submission against the module its lab names (``bytes2logits.kit.labs``).

Lessons may use the base layer, the engine and the kit's widgets; nothing outside the lessons imports them.
"""
