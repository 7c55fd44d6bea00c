"""KeyDiff as a KVLens TorchScript scorer (docs/plugins.md).

Per KV head, the anchor is the mean of the unit vectors of the keys the head
holds; a key scores -cos(key, anchor), so the keys least like the head's
common direction are kept (Park et al. 2025; kvpress KeyDiffPress). The
built-in policy `keydiff` computes the same scores: run this one with
`window=0` (KeyDiff needs no attention) and the two keep the same entries.

    python3 keydiff.py keydiff.pt
    kvlens-cli compare --policy script:keydiff.pt:window=0 --policy keydiff --budget 25% ...
"""
import sys

import torch


class KeyDiff(torch.nn.Module):
    def forward(self, keys: torch.Tensor, values: torch.Tensor, queries: torch.Tensor,
                attention: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # keys [Hkv, L, D]; positions [Hkv, L], -1 where a head holds nothing.
        held = (positions >= 0).to(keys.dtype).unsqueeze(-1)
        unit = keys / keys.norm(2, -1, True).clamp_min(1e-12)
        anchor = (unit * held).sum(1, keepdim=True) / held.sum(1, keepdim=True).clamp_min(1.0)
        return -torch.nn.functional.cosine_similarity(keys, anchor, dim=-1)  # [Hkv, L]


if __name__ == "__main__":
    torch.jit.script(KeyDiff()).save(sys.argv[1] if len(sys.argv) > 1 else "keydiff.pt")
