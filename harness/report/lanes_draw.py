"""Drawing the rows of the figure's three lanes (a mixin of crashlab.report.figure._Figure):
checkpoint blocks, authority, inbox deliveries and workers; services, remote records and
other actors; ledger knowledge with its disagreements; the "where it ended" column."""
from __future__ import annotations

from . import labels, legend, style
from .layout import FINAL_X0, FINAL_X1, FONT, STRIP_H, TIME_W, collapse_states, disposition_words, points, scatter


#: How far above its worker's bar an escalation is drawn (row units).
ESCALATION_LIFT = 0.36
#: Final dispositions that claim the run left no effect / that it left one.
CLAIMS_ABSENT = frozenset({"FAILED_NO_EFFECT", "CANCELLED_NO_EFFECT"})
CLAIMS_PRESENT = frozenset({"SUCCEEDED", "FAILED_EFFECT_REMAINS", "CANCELLED_EFFECT_REMAINS"})


class LaneDrawing:
    FONT = FONT         # the figure's type size (a slide's is larger)

    # ---------------------------------------------------------------- run lane
    def draw_run(self, ax):
        X = self.axis.x
        marks: dict[tuple[str, str], list] = {}
        for r in self.data.runs:
            y = self.state_rows[r.id]
            blocks = collapse_states(r.states)
            spans = [(X(first.start), X(last.end)) for first, last, _ in blocks]
            colors = [style.RUN_COLORS.get(first.label, style.UNKNOWN_COLOR) for first, _, _ in blocks]
            self._bars(ax, y, spans, colors)
            for (first, last, seqs), (a, b), c in zip(blocks, spans, colors):
                self.used["run"].add(first.label)
                for seq in seqs:
                    self.loc[seq] = ("run", y)
                vs = f"v{first.version}" if first is last else f"v{first.version}–v{last.version}"
                many = f" ×{len(seqs)}" if len(seqs) > 1 else ""
                self._label_in(ax, a, b, y, [f"{vs} {first.label}{many}", f"{vs} {first.label}", vs + many, vs], c)
            for w in r.workers:
                wy = self.worker_rows[w.name]
                a, b = X(w.start), X(w.end)
                self._bars(ax, wy, [(a, b)], [style.WORKER_COLOR], height=0.5)
                for p0, p1 in w.pauses:
                    self.shapes.bars([(X(p0), max(X(p1) - X(p0), 0.12))], (wy - 0.25, 0.5), facecolors="none",
                                     edgecolors="#6a1b9a", hatch="////", linewidths=0.6)
                for l0, l1, epoch in w.leases:     # a line for the lease, a tick where it begins
                    shade = style.LEASE_COLORS[(epoch or 0) % 2]
                    self.shapes.segments([[(X(l0), wy - 0.36), (X(l1), wy - 0.36)]], color=shade, linewidth=1.6)
                    marks.setdefault(("lease", shade), []).append((X(l0), wy - 0.36))
                epochs = "→".join(f"e{e}" for e in dict.fromkeys(e for _, _, e in w.leases))
                short = w.name.rsplit("/", 1)[-1]
                self._label_in(ax, a, b, wy, [f"{short} {epochs}".strip(), short], style.WORKER_COLOR,
                               boxed=bool(w.pauses))
                self.loc[w.seq] = ("run", wy)
                if w.end_kind in ("crash", "adapter_fault", "replaced"):
                    marks.setdefault((w.end_kind, ""), []).append((b, wy))
                for m in w.marks:
                    kind = m.kind
                    # an escalation sits just above the bar: at the end of a run it shares its
                    # moment with the finish, which would hide it
                    my = wy + ESCALATION_LIFT if kind == "escalation" else wy
                    self.loc[m.seq] = ("run", my)
                    if kind in ("lease", "adapter_fault"):
                        continue
                    marks.setdefault((kind, ""), []).append((X(m.t), my))
                if w.leases:
                    self.used["worker"].add("lease_granted" if w.granted else "lease")
                if w.pauses:
                    self.used["worker"].add("paused")
        for (kind, shade), pts in sorted(marks.items()):
            xs, ys = zip(*pts)
            if kind == "lease":
                points(ax, xs, ys, "|", 36, facecolors=shade, edgecolors="face", linewidths=1.0, zorder=2)
                continue
            glyph, color, filled, _label = style.WORKER_GLYPHS[kind]
            scatter(ax, xs, ys, glyph, color, filled, 30)
            self.used["worker"].add(kind)
        self.draw_authority(ax)
        self.draw_inbox(ax)

    def draw_authority(self, ax):
        X = self.axis.x
        for run, y in self.auth_rows.items():
            items = [a for a in self.story.authority if a.run == run]
            revokes = sorted(a.t for a in items if a.kind == "revoked")
            grants = [a for a in items if a.kind == "granted"]
            spans = []
            for g in grants:
                stop = min([t for t in revokes if t >= g.t] + [g.until if g.until is not None else self.axis.end,
                                                                self.axis.end])
                spans.append((X(g.t), X(stop)))
                self.loc[g.seq] = ("run", y)
                ended = "expired" if g.until is not None and g.until <= self.axis.end else "until"
                when = style.format_time(g.until, self.origin) if g.until is not None else "never"
                label = f"{g.label} live, {ended} {when}" if g.until is not None else f"{g.label} live (no expiry)"
                self.used["authority"].add("granted")
                if not self._label_in(ax, X(g.t), X(stop), y, [label, g.label], legend.GRANT_COLOR):
                    self._note(ax, X(g.t), y, label, offsets=(0.0, 0.36))
                if g.until is not None and g.until <= self.axis.end:
                    self.shapes.segments([[(X(g.until), y - 0.3), (X(g.until), y + 0.3)]], color="#6a1b9a",
                                         linewidth=1.4, capstyle="projecting")
            self._bars(ax, y, spans, legend.GRANT_COLOR, height=0.5)
            by_kind: dict[str, list] = {}
            groups: list[list] = []
            for a in items:
                if a.kind == "granted":
                    continue
                self.loc[a.seq] = ("run", y)
                by_kind.setdefault(a.kind, []).append(X(a.t))
                if groups and groups[-1][0].kind == a.kind and groups[-1][0].label == a.label:
                    groups[-1].append(a)
                else:
                    groups.append([a])
            for kind, xs in by_kind.items():
                g, color, filled, _ = legend.AUTHORITY[kind]
                scatter(ax, xs, [y] * len(xs), g, color, filled, 28)
                self.used["authority"].add(kind)
            for group in groups:
                a = group[0]
                text = {"requested": f"requested {a.label}", "refused": f"not live: {a.label}",
                        "revoked": a.label}[a.kind]
                text = style.clip(text, 48) + (f" ×{len(group)}" if len(group) > 1 else "")
                self._note(ax, X(a.t), y, text, color=legend.AUTHORITY[a.kind][1], offsets=(0.36, -0.36))

    def draw_inbox(self, ax):
        X = self.axis.x
        for run, y in self.inbox_rows.items():
            items = [d for d in self.story.deliveries if d.run == run]
            first = [X(d.t) for d in items if d.copy == 1]
            dup = [X(d.t) for d in items if d.copy > 1]
            for d in items:
                self.loc[d.seq] = ("run", y)
            if first:
                g, color, filled, _ = legend.DELIVERY["first"]
                scatter(ax, first, [y] * len(first), g, color, filled, 24)
                self.used["inbox"].add("first")
            if dup:
                g, color, filled, _ = legend.DELIVERY["duplicate"]
                scatter(ax, dup, [y] * len(dup), g, color, filled, 34, zorder=5)
                self.used["inbox"].add("duplicate")
            groups: list[list] = []
            for d in items:
                what = disposition_words(d.disposition, d.copy > 1)
                if groups and groups[-1][0].event_id == d.event_id and d.copy > 1 and groups[-1][0].copy > 1 \
                        and disposition_words(groups[-1][0].disposition, True) == what:
                    groups[-1].append(d)
                else:
                    groups.append([d])
            for g in groups:
                d = g[0]
                what = disposition_words(d.disposition, d.copy > 1)
                text = (f"{d.type} duplicate{' ×' + str(len(g)) if len(g) > 1 else ''}: {what}" if d.copy > 1
                        else f"{d.type}: {what}")
                self._note(ax, X(d.t), y, text, color=legend.DELIVERY["duplicate" if d.copy > 1 else "first"][1],
                           offsets=(0.36, -0.36))

    # ---------------------------------------------------------------- remote lane
    def draw_remote(self, ax):
        X = self.axis.x
        for e in self.data.effects:
            if e.cause == "other_actor":
                continue
            row = self.effect_rows.get((e.service, e.ref))
            color = style.CAUSE_COLORS.get(e.cause, "#455a64")
            self.used["cause"].add(e.cause)
            if row is None:
                points(ax, [X(e.start)], [self.more_effects_row], "o", 22, facecolors=color, edgecolors=color, zorder=4)
                self.loc[e.seq] = ("remote", self.more_effects_row)
                continue
            self.loc[e.seq] = ("remote", row)
            if e.compensates:       # a release is an instantaneous effect of its own
                points(ax, [X(e.start)], [row], "v", 46, facecolors=color, edgecolors=color, zorder=4)
                self._note(ax, X(e.start), row, e.ref, color="#212121", size=self.FONT - 0.5)
                continue
            a, b = X(e.start), X(e.released) if e.released is not None else TIME_W
            self._bars(ax, row, [(a, b)], [color], height=0.5, alpha=0.9)
            if e.released is not None:
                self.shapes.segments([[(b, row - 0.3), (b, row + 0.3)]], color="#212121", linewidth=1.4,
                                     capstyle="projecting")
                self.loc[e.released_seq] = ("remote", row)
                self.used["cause"].add("released")
            self._label_in(ax, a, b, row, [f"{e.ref} key {style.shorten(e.key, 18)}", e.ref], color)
        marks: dict[str, list] = {}
        for m in self.data.transport:
            y = self.service_rows.get(m.label)
            if y is None:
                continue
            marks.setdefault(m.kind, []).append((X(m.t), y))
            self.loc[m.seq] = ("remote", y)
        for kind, pts in sorted(marks.items()):
            glyph, color, filled, _ = style.TRANSPORT_GLYPHS[kind]
            xs, ys = zip(*pts)
            scatter(ax, xs, ys, glyph, color, filled, 34, zorder=6)
            self.used["transport"].add(kind)
        if self.other_row is not None:
            others = [e for e in self.data.effects if e.cause == "other_actor"]
            points(ax, [X(e.start) for e in others], [self.other_row] * len(others), "o", 22,
                   facecolors=style.CAUSE_COLORS["other_actor"], edgecolors="#78909c", zorder=4)
            for e in others:
                self.loc[e.seq] = ("remote", self.other_row)
            self.used["cause"].add("other_actor")

    # ---------------------------------------------------------------- knowledge lane
    def draw_knowledge(self, ax):
        X = self.axis.x
        for k in self.data.knowledge:
            y = self.key_rows.get(k.key)
            if y is None:
                continue
            spans = [(X(s.start), X(s.end) if s.end is not None else TIME_W) for s in k.states]
            colors = [style.KNOWLEDGE_COLORS.get(s.label, style.UNKNOWN_COLOR) for s in k.states]
            self._bars(ax, y, spans, colors)
            for s, (a, b), c in zip(k.states, spans, colors):
                self.used["knowledge"].add(s.label)
                self.loc[s.seq] = ("knowledge", y)
                self._label_in(ax, a, b, y, [s.label, style.abbreviation(s.label)], c, boxed=True)
            if k.stale:
                points(ax, [X(m.t) for m in k.stale], [y] * len(k.stale), "x", 36, facecolors="#c62828",
                       edgecolors="face", zorder=4)
                self.used["knowledge"].add("stale")
        for kind in ("lags", "contradicts"):
            color, hatch, _ = legend.MISMATCH[kind]
            for key, y in self.key_rows.items():
                spans = [(X(m.start), X(m.end)) for m in self.story.mismatches if m.key == key and m.kind == kind]
                if spans:
                    self._bars(ax, y, spans, "none", height=0.74, edgecolor=color, hatch=hatch, linewidth=0.9,
                               zorder=3)
                    self.used["mismatch"].add(kind)
        if self.more_keys:
            labels.text(ax, TIME_W, min(self.key_rows.values()) - 0.55, f"+{self.more_keys} more keys (see the report)",
                        ha="right", va="bottom", fontsize=self.FONT - 1, color="#616161")

    # ---------------------------------------------------------------- where each row ended
    def draw_final(self, ax):
        run_ax = remote_ax = know_ax = ax
        labels.text(ax, (FINAL_X0 + FINAL_X1) / 2, -STRIP_H / 2, "where it ended", ha="center", va="center",
                    fontsize=self.FONT - 0.5, color="#37474f", fontweight="bold")
        width = FINAL_X1 - FINAL_X0       # the column ends at the plot's edge: its caps are not clipped there
        whole, story = getattr(self, "whole", (self.data, self.story))   # a window shows the end all the same
        states = {r.id: r.states for r in whole.runs}
        knowledge = {k.key: k.states for k in whole.knowledge}
        for r in self.data.runs:
            y = self.state_rows[r.id]
            mine = states.get(r.id, r.states)
            final = r.disposition or (mine[-1].label if mine else None)
            if final is None:
                continue
            color = style.RUN_COLORS.get(final, style.UNKNOWN_COLOR)
            held = [e.ref for e in self.data.effects if e.run == r.id and e.cause != "other_actor"
                    and not e.compensates and e.released is None]
            wrong = (f"≠ {', '.join(held[:2])} held" if final in CLAIMS_ABSENT and held
                     else "≠ nothing held" if final in CLAIMS_PRESENT and not held
                     and any(e.run == r.id and not e.compensates for e in self.data.effects) else None)
            self._bars(run_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.7, clip_on=False,
                       edgecolor=style.VIOLATION_COLOR if wrong else "#37474f", linewidth=2.0 if wrong else 0.8)
            if wrong:
                self._contradicted(run_ax, y - 0.4, wrong)
            self.used["run"].add(final)
            if not self._label_in(run_ax, FINAL_X0, FINAL_X1, y, [final, final.replace("_", " ")], color):
                head, _, tail = final.partition("_")
                labels.text(run_ax, FINAL_X0 + width / 2, y, f"{head}\n{tail}", ha="center", va="center",
                            linespacing=0.95, fontsize=self.FONT - 1.5, color=style.text_color(color))
        for k in self.data.knowledge:
            y = self.key_rows.get(k.key)
            mine = knowledge.get(k.key) or k.states
            if y is None or not mine:
                continue
            last = mine[-1].label
            color = style.KNOWLEDGE_COLORS.get(last, style.UNKNOWN_COLOR)
            wrong = any(m.key == k.key and m.kind == "contradicts" and m.end >= whole.end
                        for m in story.mismatches)
            self._bars(know_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.62, clip_on=False,
                       **({"edgecolor": style.VIOLATION_COLOR, "linewidth": 2.0} if wrong else {}))
            if wrong:
                self._contradicted(know_ax, y - 0.31, "≠ the service")
            self._label_in(know_ax, FINAL_X0, FINAL_X1, y, [last, style.abbreviation(last)], color)
        for e in self.data.effects:
            y = self.effect_rows.get((e.service, e.ref))
            if y is None or e.compensates:
                continue
            held = e.released is None
            color = style.CAUSE_COLORS.get(e.cause, "#455a64") if held else "#eceff1"
            self._bars(remote_ax, y, [(FINAL_X0, FINAL_X1)], [color], height=0.5, clip_on=False)
            self._label_in(remote_ax, FINAL_X0, FINAL_X1, y, ["still held" if held else "released"], color)
        self.shapes.segments([[(TIME_W + 1.2, 0), (TIME_W + 1.2, 1)]], color="#9e9e9e", linewidth=0.8,
                             linestyle=(0, (1, 2)), zorder=1, transform=ax.get_xaxis_transform())

    def _contradicted(self, ax, y: float, text: str) -> None:
        """Under an end cap the service contradicts: what it really holds, in red."""
        labels.text(ax, FINAL_X1, y, text, ha="right", va="top", fontsize=self.FONT - 1.5,
                    color=style.VIOLATION_COLOR, fontweight="bold", zorder=6)
        self.used["final"].add("contradicts")

