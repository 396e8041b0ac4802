"""The chapters' reference code: what each lab's learner writes, done carefully.

``basic`` (chapter 01), ``granularity`` (02), ``bpe`` (03–05) and its ``merge_stepper`` widget (03),
``specials`` (06), ``templates`` (07), ``vocabsize`` (08), ``pitfalls`` and ``vocab_files`` (09),
``patches`` (10). A lab's hidden suite grades a submission against the module its lab names
(``bytes2logits.kit.labs``).

Lessons may use the base layer, the engine and the kit's widgets; nothing outside the lessons imports them.
"""
