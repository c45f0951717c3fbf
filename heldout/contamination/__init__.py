"""Decontamination: which training items overlap which evaluation items, and by what evidence.

The evaluation side is only ever its fingerprints, so the test split is never opened. Modules:
`text` and `code` hash texts and programs, one way for both sides; `fingerprints` makes the
eval splits' fingerprint files; `index` indexes them and matches a training item against them
(the methods are listed there); `sources` reads the training data and `scan` streams it past
the index; `report` says what was found and what the policy (`config`) does about it. `recall`
is the other check, for training data nobody can read: whether a model completes a task's
text verbatim from its first part (`heldout probe-recall`).
"""
