"""The chaos soak's figures, table and chart (:mod:`benchmarks.soak`), from a finished run."""

from __future__ import annotations

import bisect
import statistics
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import _soak
from benchmarks._common import new_figure, save_figure

if TYPE_CHECKING:
    from benchmarks._soak import Lane
    from benchmarks.soak import Soak

#: A share member that lived this long after handling a record had ACCEPTed it to the broker
#: (its executor acknowledges every 100 ms, sent with the next poll).
ACK_DUE_S = 2.0
COLOURS = {"leader-kill": "tab:red", "controlled-shutdown": "tab:orange", "cut-off": "tab:purple",
           "member-kill": "tab:brown", "partitions-added": "tab:green",
           "slow-handler": "tab:gray", "member-died": "black"}


def _lane_faults(soak: Soak, lane: Lane) -> list[dict[str, Any]]:
    return [f for f in soak.faults if lane.spec.name in f["lanes"]]


def recovery(soak: Soak, lane: Lane, fault: dict[str, Any]) -> float | None:
    """Seconds from ``fault``'s start until every partition of ``lane`` that got a record sent
    after it handled one (None while one has not)."""
    first = lane.tally.first_sent_after(fault["monotonic"])
    # The partitions the level topics had then (or just got, for partitions-added): one added
    # later waits for the clients' metadata refresh, which is that fault's recovery.
    counts = fault["partitions_at"][lane.spec.name]
    with lane.tally.lock:
        written = {(level, p) for v, p in lane.tally.acked_partition.items()
                   if lane.tally.sent.get(v, 0.0) > fault["monotonic"]
                   and p < counts[level := int(v.split(":", 1)[0])]}
    if not written or not written <= first.keys():
        return None
    return max(first[where] for where in written)


def _duplicates(soak: Soak, lane: Lane) -> dict[str, Any]:
    """Each handling beyond a record's first, put on the latest fault of the lane before it."""
    faults = _lane_faults(soak, lane)
    starts = [soak.t0 + f["at"] for f in faults]
    per_fault = [0] * len(faults)
    before_any = 0
    for at, _, _ in lane.duplicates:
        index = bisect.bisect_right(starts, at) - 1
        if index < 0:
            before_any += 1
        else:
            per_fault[index] += 1
    bound = _soak.REPLAY_PER_PARTITION * sum(lane.partitions.values())
    figures: dict[str, Any] = {
        "duplicates": len(lane.duplicates), "before_any_fault": before_any,
        "per_fault": per_fault, "max_per_fault": max(per_fault, default=0),
        "bound_per_fault": bound,
        "over_bound": [faults[i]["kind"] + f" at {faults[i]['at']} s: {n}"
                       for i, n in enumerate(per_fault) if n > bound],
    }
    if lane.spec.mode == "share":
        killed = {f["killed"]["member"]: f["killed"]["at_wall"] for f in faults if "killed" in f}
        after_ack = [(at, value) for at, value, _ in lane.duplicates
                     if lane.first_at[value] + ACK_DUE_S
                     < killed.get(lane.first_member[value], float("inf"))]
        figures["redelivered_after_ack"] = len(after_ack)
        figures["redelivered_after_ack_examples"] = [
            {"value": v, "first_at": round(lane.first_at[v] - soak.t0, 2),
             "again_at": round(at - soak.t0, 2), "first_member": lane.first_member[v]}
            for at, v in after_ack[:20]]
    return figures


def lane_figures(soak: Soak, lane: Lane) -> dict[str, Any]:
    """A lane's invariants and figures."""
    tally = lane.tally
    with tally.lock:
        acked, failed = set(tally.acked), dict(tally.failed)
        partition = dict(tally.acked_partition)
    lost = sorted(acked - lane.first_member.keys())
    moved = [b for b in lane.order_breaks if partition.get(b[1]) != partition.get(b[2])]
    real = [b for b in lane.order_breaks if b not in moved]
    faults = _lane_faults(soak, lane)
    windows = []
    for fault in faults:
        took = recovery(soak, lane, fault)
        fault.setdefault("recovery_s", {})[lane.spec.name] = (
            None if took is None else round(took, 2))
        ended = fault.get("ended_monotonic", fault["monotonic"])
        end = max(ended, fault["monotonic"] + (took if took is not None else 1e9))
        windows.append((fault["monotonic"], end))
    with tally.lock:
        since = min(tally.first_handled.values(), default=0.0)
    stalls = {level: _soak.longest_stall_outside(tally, level, windows, since)
              for level in range(_soak.LEVELS)}
    for stall in stalls.values():
        stall["from"] = round(stall["from"] - since, 2)
        stall["to"] = round(stall["to"] - since, 2)
    figures: dict[str, Any] = {
        "client": lane.spec.client, "mode": lane.spec.mode, "topic": lane.topic,
        "records": len(acked), "send_failures": len(failed),
        # Why sends failed (the client's error, most common first): a failed send is not a
        # lost record, but is never silent.
        "send_failure_reasons": Counter(failed.values()).most_common(5),
        "handled": len(lane.first_member),
        "lost": len(lost), "lost_examples": lost[:20],
        "order_breaks": len(real), "order_break_examples": real[:20],
        "order_breaks_key_moved": len(moved),
        **_duplicates(soak, lane),
        "partitions": lane.partitions,
        "longest_stall_outside_faults_s": max(s["stall_s"] for s in stalls.values()),
        "stalls_outside_faults": stalls,
        "members_started": len(lane.members),
    }
    if lane.reader is not None:
        figures["exactly_once"] = lane.reader.figures(acked)
    return figures


def fault_summary(faults: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: how many, and the recovery (worst lane per fault) median and max."""
    summary = {}
    for kind in sorted({f["kind"] for f in faults}):
        of_kind = [f for f in faults if f["kind"] == kind]
        worst = [max((v for v in f.get("recovery_s", {}).values() if v is not None),
                     default=None) for f in of_kind]
        known = [w for w in worst if w is not None]
        summary[kind] = {"count": len(of_kind),
                         "recovery_median_s": statistics.median(known) if known else None,
                         "recovery_max_s": max(known, default=None),
                         "recovery_unknown": len(worst) - len(known)}
    return summary


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def table(result: dict[str, Any]) -> str:
    """The run as three markdown tables: lanes, faults, processes."""
    lines = [
        "| lane | records | send failures | lost | order breaks (key moved to an added partition) "
        "| duplicates (max per fault / bound) "
        "| exactly-once missing / duplicated | longest stall outside faults |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, lane in result["lanes"].items():
        eos = lane.get("exactly_once")
        lines.append(
            f"| {name} | {lane['records']} | {lane['send_failures']} | {lane['lost']} | "
            f"{lane['order_breaks']} "
            f"({lane['order_breaks_key_moved']}) | "
            f"{lane['duplicates']} ({lane['max_per_fault']} / {lane['bound_per_fault']}) | "
            f"{'-' if eos is None else str(eos['missing']) + ' / ' + str(eos['duplicated'])} | "
            f"{lane['longest_stall_outside_faults_s']:.1f} s |")
    lines += ["", "| fault | count | recovery median / max |", "|---|---|---|"]
    for kind, row in result["fault_summary"].items():
        lines.append(f"| {kind} | {row['count']} | {_seconds(row['recovery_median_s'])} / "
                     f"{_seconds(row['recovery_max_s'])} |")
    lines += ["", "| process | life | RSS MB start → end (slope/h) | threads | fds "
              "| rise past tolerance |", "|---|---|---|---|---|---|"]
    for label, row in result["resources"].items():
        if not row["long_lived"]:
            continue
        rss, threads, fds = row["rss_mb"], row["threads"], row["fds"]
        lines.append(
            f"| {label} | {row['life_s'] / 60:.1f} min | {rss['start']:.0f} → {rss['end']:.0f} "
            f"({rss['slope_per_h']:+.1f}) | {threads['start']} → {threads['end']} | "
            f"{fds['start']} → {fds['end']} | {', '.join(row['leak']) or 'no'} |")
    return "\n".join(lines)


def chart(soak: Soak, path: Path, bin_s: int = 5) -> None:
    """Records/s per level of every lane over the soak clock, the faults marked."""
    fig, axes = new_figure(len(soak.lanes), 1, figsize=(12, 2.4 * len(soak.lanes)),
                           sharex=True, squeeze=False)
    end = int(soak.now()) + 1
    for ax, lane in zip(axes[:, 0], soak.lanes, strict=True):
        for level in range(_soak.LEVELS):
            counts = lane.per_second[level]
            starts = list(range(0, end, bin_s))
            rates = [sum(counts.get(s, 0) for s in range(b, b + bin_s)) / bin_s for b in starts]
            ax.plot(starts, rates, label=f"level {level}", linewidth=1)
        for fault in _lane_faults(soak, lane):
            until = fault.get("ended", fault["at"]) if fault["kind"] != "partitions-added" \
                else fault["at"] + 1
            ax.axvspan(fault["at"], max(until, fault["at"] + 0.5),
                       color=COLOURS[fault["kind"]], alpha=0.25, linewidth=0)
        ax.set_ylabel("records/s")
        ax.set_title(f"{lane.spec.name} ({lane.spec.mode})", fontsize=9)
    from matplotlib.patches import Patch  # after new_figure chose the Agg backend

    handles = [Patch(color=colour, alpha=0.4, label=kind) for kind, colour in COLOURS.items()]
    axes[0, 0].legend(handles=[*axes[0, 0].get_legend_handles_labels()[0], *handles],
                      fontsize=7, ncol=5, loc="upper right")
    axes[-1, 0].set_xlabel("seconds since the lanes were created")
    save_figure(fig, path)
