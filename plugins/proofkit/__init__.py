"""The proof toolkit: how a store builds a run's proof from its tool records, as a library (not
a plugin).

The kernel defines what a proof is (``soulacy.kernel.store``: ``ProofRecord``, the
``ProofStore`` protocol, ``ToolRecord`` and ``canonical_json``) and builds none. This module
holds what every store would otherwise write again, so that they all write the same bytes
for the same run: :func:`make_proof` (the canonical JSON body and its sha256) and
:func:`receipt` (one tool call, each text field cut by :func:`bounded` at
:data:`RECEIPT_FIELD_CHARS`). The builtin memory store and the SQL stores
(``soulacy.plugins.sqlkit``) build theirs with it; a third-party store may too. Importing it
registers nothing.
"""

from ._proofs import RECEIPT_FIELD_CHARS, bounded, make_proof, receipt

__all__ = ["RECEIPT_FIELD_CHARS", "bounded", "make_proof", "receipt"]
