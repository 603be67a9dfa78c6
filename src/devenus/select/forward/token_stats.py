"""``entropy`` (mean H over response tokens, full vocabulary width) and ``self_certainty`` (mean SC): from
the final hidden states, the head applied in token x vocabulary chunks (the ``[T, V]`` logits never exist)."""

from __future__ import annotations

import torch

from devenus.select.forward import ForwardUnit, host
from devenus.signals.head import token_stats_from_hidden


class TokenStats(ForwardUnit):
    names = ("entropy", "self_certainty")

    def collect(self, batch, last, out):
        o, resp = self.options, batch.resp
        # the distribution at position i predicts token i+1: response tokens are predicted from i-1
        pred_pos = torch.zeros_like(resp)
        pred_pos[:, :-1] = resp[:, 1:]
        rows, cols = pred_pos.nonzero(as_tuple=True)
        stats = token_stats_from_hidden(last[rows, cols], self.head.weight, getattr(self.head, "bias", None),
                                        temperature=o.temperature, token_chunk=o.token_chunk, vocab_chunk=o.vocab_chunk)
        rows = rows.cpu()
        b = len(batch.idx)
        count = torch.zeros(b, dtype=torch.float64).index_add_(0, rows, torch.ones(len(rows), dtype=torch.float64))
        for name in self.want:
            s = torch.zeros(b, dtype=torch.float64).index_add_(0, rows, host(stats[name]))
            out[name][batch.idx] = (s / count.clamp(min=1)).numpy()
