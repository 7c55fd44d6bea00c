"""Focused-attention scorer: a KVLens TorchScript scorer (docs/plugins.md).

SnapKV sums the attention each key receives from the observation window's
queries. Here each window query's vote is weighted by how focused it is:
1 - H(row) / log(n), with H the entropy of its attention row over the n keys
it sees. A query that spreads its attention evenly over everything says
little about which keys matter and counts for almost nothing; one that looks
at a few keys counts fully. Scores are per query head [Hq, L]; the engine
combines each GQA group (gqa=mean|max|sum) and keeps the window's own keys.

    python3 attention_entropy.py focused.pt
    kvlens-cli compare --policy script:focused.pt --budget 25% ...      # window=32 by default
"""
import math
import sys

import torch


class FocusedAttention(torch.nn.Module):
    def forward(self, keys: torch.Tensor, values: torch.Tensor, queries: torch.Tensor,
                attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # attention [Hq, W, L]: rows sum to 1 over the keys each query sees.
        hq, w, length = attention.shape
        if w == 0:  # window=0: no queries to learn from; keep the most recent (ties go to them)
            return torch.zeros(hq, length, dtype=attention.dtype, device=attention.device)
        p = attention.clamp_min(1e-30)
        entropy = -(attention * p.log()).sum(-1)                        # [Hq, W]
        seen = (attention > 0).sum(-1).clamp_min(2).to(attention.dtype)  # keys each query attends to
        focus = (1.0 - entropy / seen.log()).clamp_min(0.0)              # 1 = one key, 0 = uniform
        return (attention * focus.unsqueeze(-1)).sum(1)                  # [Hq, L]


if __name__ == "__main__":
    torch.jit.script(FocusedAttention()).save(sys.argv[1] if len(sys.argv) > 1 else "focused.pt")
