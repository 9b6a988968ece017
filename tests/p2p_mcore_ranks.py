#!/usr/bin/env python3
"""p2p_mcore_ranks.py RESHARD - reshard's template expansion (docs/p2p.md, "Configurations") checked
against Megatron-Core's own RankGenerator, the class initialize_model_parallel builds its groups with.

For every configuration enumerated here (tp 1-4, pp 1-4, dp 1-4 and 6, 8, every ep dividing dp,
rank offsets 0 and 3; 200-odd configs, up to 64 ranks), Megatron's groups are taken from
  RankGenerator(tp, ep=1, dp, pp, cp=1, order "tp-cp-ep-dp-pp", rank_offset)    (dense layers)
  RankGenerator(tp, ep, dp/ep, pp, cp=1, order "tp-cp-ep-dp-pp", rank_offset)   (expert layers,
                 expert tp = tp, expert dp = dp/ep, as initialize_model_parallel sizes them)
and held against `reshard p2p layout MODEL --config src --json` of a template model with that
configuration (first_rank = the offset), rank by rank:
  - pp: a rank's stage is its position in its pp group; it holds exactly the layers
    split(layers, pp, stage) gives (section 4's uneven split), the embedding on stage 0, the output
    on the last;
  - tp: its position in its tp group is its chunk of every column-parallel weight (qkv, fc1,
    embedding, output) and row-parallel weight (proj, fc2);
  - dp: every member of its dp group holds the same boxes;
  - ep / expert tp / expert dp: its position in its ep group is its chunk of the experts (dim 0),
    its position in the expert tp group its chunk of dims 1/2, and every member of its expert dp
    group holds the same expert boxes.
Exit 0 when all agree, 1 on the first difference (printed), 77 when megatron-core does not import
(the caller's SKIP_RETURN_CODE).
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    from megatron.core.parallel_state import RankGenerator
    from megatron.core import package_info
except Exception as e:  # noqa: BLE001
    print("SKIP: megatron-core does not import in %s (%s)" % (sys.executable, e))
    sys.exit(77)

RESHARD = sys.argv[1]
ORDER = "tp-cp-ep-dp-pp"


def split(n, k, i):
    """torch.chunk's split (docs/contract.md section 4): (offset, size) of part i of n over k."""
    c = -(-n // k) if k else 0
    off = min(c * i, n)
    return off, max(0, min(c, n - off))


def layout(tp, pp, dp, ep, offset, layers, experts):
    h, f, v = 12, 24, 24  # divisible by every tp here, so each rank's box is an even chunk
    model = {"seed": 1, "model": {"template": {"layers": layers, "hidden": h, "ffn": f, "vocab": v,
                                               "experts": experts, "bias": False, "dtype": "F32"}},
             "src": {"template": {"tp": tp, "pp": pp, "dp": dp, "ep": ep}, "first_rank": offset},
             "dst": {"template": {"tp": 1, "pp": 1, "dp": 1, "ep": 1}}}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(model, fh)
    try:
        out = subprocess.run([RESHARD, "p2p", "layout", fh.name, "--config", "src", "--json"],
                             capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(fh.name)
    if out.returncode:
        raise SystemExit("reshard p2p layout failed: %s" % out.stderr.strip())
    res = {}
    for r in json.loads(out.stdout)["ranks"]:
        res[r["rank"]] = {p["name"]: (tuple(p["offsets"]), tuple(p["sizes"])) for p in r["params"]}
    return res, h, f, v


def check(tp, pp, dp, ep, offset):
    layers = pp + 1 if pp > 1 else 2  # uneven over the stages when pp > 1
    experts = 2 * ep if ep > 1 else 0
    lay, h, f, v = layout(tp, pp, dp, ep, offset, layers, experts)
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=1, order=ORDER, rank_offset=offset)
    expert = RankGenerator(tp=tp, ep=ep, dp=dp // ep, pp=pp, cp=1, order=ORDER, rank_offset=offset)
    what = "tp %d pp %d dp %d ep %d first_rank %d" % (tp, pp, dp, ep, offset)
    world = tp * pp * dp
    if sorted(lay) != list(range(offset, offset + world)):
        return "%s: reshard's ranks %s, Megatron's %d..%d" % (what, sorted(lay)[:8], offset, offset + world - 1)

    def pos(groups):
        m = {}
        for g in groups:
            for i, r in enumerate(g):
                m[r] = (i, tuple(g))
        return m
    tpg, ppg, dpg = pos(dense.get_ranks("tp")), pos(dense.get_ranks("pp")), pos(dense.get_ranks("dp"))
    etp, epg, edp = pos(expert.get_ranks("tp")), pos(expert.get_ranks("ep")), pos(expert.get_ranks("dp"))
    for r in range(offset, offset + world):
        held = lay[r]
        stage = ppg[r][0]
        off, n = split(layers, pp, stage)
        want = set(range(off, off + n))
        got = {int(k.split(".")[1]) for k in held if k.startswith("layers.")}
        if got != want:
            return "%s: rank %d is stage %d of pp group %s: Megatron's layers %s, reshard's %s" % (
                what, r, stage, list(ppg[r][1]), sorted(want), sorted(got))
        if ("embedding.weight" in held) != (stage == 0) or ("output.weight" in held) != (stage == pp - 1):
            return "%s: rank %d (stage %d): embedding/output on the wrong stage" % (what, r, stage)
        t = tpg[r][0]
        for l_ in sorted(want):
            for name, dim, full in (("attn.qkv.weight", 0, 3 * h), ("attn.proj.weight", 1, h)) + \
                    ((("mlp.fc1.weight", 0, f), ("mlp.fc2.weight", 1, f)) if not experts else ()):
                o, s = held["layers.%d.%s" % (l_, name)]
                if (o[dim], s[dim]) != split(full, tp, t):
                    return "%s: rank %d is tp rank %d of %s: layers.%d.%s box %s+%s, Megatron's chunk %s" % (
                        what, r, t, list(tpg[r][1]), l_, name, o, s, split(full, tp, t))
            if experts:
                e, et = epg[r][0], etp[r][0]
                for name, dim, full in (("mlp.experts.fc1.weight", 1, f), ("mlp.experts.fc2.weight", 2, f)):
                    o, s = held["layers.%d.%s" % (l_, name)]
                    if (o[0], s[0]) != split(experts, ep, e) or (o[dim], s[dim]) != split(full, tp, et):
                        return ("%s: rank %d is ep rank %d of %s and expert tp rank %d of %s: layers.%d.%s box "
                                "%s+%s" % (what, r, e, list(epg[r][1]), et, list(etp[r][1]), l_, name, o, s))
        for grp, kind in ((dpg[r][1], "dp"), (edp[r][1], "expert dp")):
            for q in grp:
                a = {k: x for k, x in lay[q].items() if (".experts." in k) == (kind == "expert dp")}
                b = {k: x for k, x in held.items() if (".experts." in k) == (kind == "expert dp")}
                if a != b:
                    return "%s: ranks %d and %d share Megatron's %s group %s but hold other boxes" % (
                        what, r, q, kind, list(grp))
    return None


def main():
    n = 0
    for tp in (1, 2, 3, 4):
        for pp in (1, 2, 3, 4):
            for dp in (1, 2, 3, 4, 6, 8):
                if tp * pp * dp > 64:
                    continue
                for ep in [e for e in range(1, dp + 1) if dp % e == 0]:
                    for offset in (0, 3):
                        why = check(tp, pp, dp, ep, offset)
                        n += 1
                        if why:
                            print("FAIL " + why)
                            return 1
    print("p2p_mcore_ranks: reshard's template expansion == Megatron-Core %s's RankGenerator in %d configs" %
          (package_info.__version__, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
