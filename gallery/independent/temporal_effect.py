"""The effect and the notification: reconcile before any resend, SENT_UNKNOWN before every send.

Called once per activity invocation by temporal_steps.Run.step; at most one send per call.
"""
import time

from temporal_store import Stale
from temporal_steps import ATTEMPT_CEILING, NOT_EXECUTED, READ_BUDGET, REFUSED, result

MARGIN_SCN_MS = 2_000          # scenario ms added to every bound we wait out


def _obs(out, boundary="after_send"):
    return {"outcome": out.code or out.kind, "status": out.status, "definite": out.kind != "ambiguous",
            "boundary": boundary, "detail": out.detail[:200]}


def reconcile(run, prof, aux):
    """One authoritative read of our effect. Returns (verdict, answer, summary)."""
    lookup = prof.get("lookup", "none")
    if lookup == "by_key":
        out = run.http.request("GET", f"/{run.service}/lookup", query={"key": run.key})
        if out.kind != "ok":
            return "unavailable", None, f"lookup {out.code or out.detail[:60]}"
        body = out.body
        run.observe(body.get("as_of"))
        if body.get("found"):
            rec = body.get("record") or {}
            if all(rec.get("intent", {}).get(f) == v for f, v in run.intent.items()):
                return "found", rec, f"lookup found {rec.get('ref')} as of {body.get('as_of')}"
            return "mismatch", rec, f"lookup: the key holds other parameters as of {body.get('as_of')}"
        if body.get("in_flight"):
            return "in_flight", body, f"lookup: a request under the key is in flight as of {body.get('as_of')}"
        return _absence(run, prof, aux, body, "lookup")
    if lookup == "none":
        return "no_read", None, "the service has no identifying read"
    out = run.http.request("GET", f"/{run.service}/search",
                           query={"incident": run.intent.get("incident"), "slot": run.intent.get("slot")})
    if out.kind != "ok":
        return "unavailable", None, f"search {out.code or out.detail[:60]}"
    body = out.body
    run.observe(body.get("as_of"))
    mine = [r for r in body.get("records", [])
            if all(r.get("intent", {}).get(f) == v for f, v in run.intent.items())]
    if len(mine) == 1:
        return "found", mine[0], f"search found {mine[0].get('ref')} as of {body.get('as_of')}"
    if len(mine) > 1:
        return "duplicates", mine, f"search found {len(mine)} records matching every intent field"
    return _absence(run, prof, aux, body, "search")


def _absence(run, prof, aux, body, how):
    """A negative read proves absence only when the attempt's end lies at least the late-delivery
    bound (plus the lag, on an eventually consistent read) before the read. Measured in real time
    between our own attempt's end and the read, scaled: no scenario clock needed."""
    as_of = body.get("as_of") or 0
    delay = run.scn(prof, "max_delivery_delay_ms")
    if delay is None:
        return "no_bound", body, f"{how} absent as of {as_of}, and the service documents no delivery bound"
    needed = delay + MARGIN_SCN_MS
    if body.get("consistency", prof.get("consistency", "strong")) != "strong":
        needed += run.scn(prof, "lag_ms") or 0.0
    end_real = aux.get("last_end_real", aux.get("last_sent_real", 0.0))
    elapsed = (time.time() - end_real) * 1000.0 * run.scale
    if elapsed >= needed:
        return "absent_final", body, f"{how} absent as of {as_of}, past the delivery bound"
    aux["absent_until_real"] = end_real + needed / 1000.0 / run.scale
    return "absent_early", body, f"{how} absent as of {as_of}, before the delivery bound"


def effect_phase(run):
    store, prof = run.store, run.profile(run.service)
    e = store.latest(run.key)
    aux = store.aux(run.key)
    k = e["knowledge"]
    if k == "CONFIRMED":
        run.write_cp("EFFECT_CONFIRMED")
        return result("continue")
    if k == "REJECTED":
        return run.terminal("FAILED_NO_EFFECT", aux.get("reason", "the service refused the request"),
                            next_owner=aux.get("next_owner"), action="STOP" if aux.get("next_owner") else None)
    if k == "SENT_UNKNOWN" or aux.get("read_first"):
        if aux.get("reads", 0) >= READ_BUDGET:
            return _unknown(run, "the reads did not settle the effect within their budget", "RECONCILE")
        verdict, answer, summary = reconcile(run, prof, aux)
        aux["reads"] = aux.get("reads", 0) + 1
        recon = e.get("reconciliation", []) + [{"query": summary.split(" ")[0], "at": run.now(),
                                                "summary": summary, "verdict": verdict}]
        if verdict == "found":
            store.append(run.entry(run.key, "CONFIRMED", remote_ref=answer.get("ref"), reconciliation=recon,
                                   evidence=[summary]))
            aux.update(unresolved=False, read_first=False)
            store.set_aux(run.key, aux)
            return result("continue")
        if verdict == "no_read":
            if k == "SENT_UNKNOWN":
                return _unknown(run, "the request may have been executed and the service offers no read "
                                "to tell; an operator verifies it independently", "STOP")
            aux["read_first"] = False
        elif verdict in ("mismatch", "duplicates"):
            store.set_aux(run.key, aux)
            return _unknown(run, "a record under this key carries other parameters; nothing more is sent "
                            "under it" if verdict == "mismatch" else "more than one record matches the intent",
                            "STOP")
        elif verdict in ("in_flight", "unavailable"):
            store.set_aux(run.key, aux)
            return result("wait", run.real_s(5_000 if verdict == "in_flight" else 10_000), summary)
        elif verdict == "absent_final":
            if k == "SENT_UNKNOWN":
                store.append(run.entry(run.key, "PROPOSED", reconciliation=recon, evidence=[summary],
                                       note="an authoritative read past the delivery bound shows nothing landed"))
            aux.update(unresolved=False, read_first=False)
            store.set_aux(run.key, aux)
            return result("continue")
        elif verdict in ("absent_early", "no_bound"):
            # an early negative read proves nothing, not even for a resend under the same key
            store.set_aux(run.key, aux)
            if verdict == "no_bound":
                return _unknown(run, "nothing found, but the service documents no late-delivery bound",
                                "RECONCILE")
            return result("wait", max(0.02, aux["absent_until_real"] - time.time()), summary)
    if run.cancel:
        if k == "SENT_UNKNOWN" and aux.get("unresolved", True):
            return _unknown(run, "cancelled while the request's outcome is unknown", "RECONCILE")
        return run.terminal("CANCELLED_NO_EFFECT", "cancelled; nothing was sent, or a read shows nothing landed")
    return _send(run, prof, e, aux)


def _unknown(run, reason, action):
    disp = "CANCELLED_EFFECT_UNKNOWN" if run.cancel else "FAILED_EFFECT_UNKNOWN"
    return run.terminal(disp, reason, next_owner="operator", action=action)


def _send(run, prof, e, aux):
    store = run.store
    now = run.now()
    if aux.get("not_before_real", 0) > time.time():
        return result("wait", aux["not_before_real"] - time.time(), "waiting out Retry-After")
    attempts = e.get("attempts", [])
    if len(attempts) >= ATTEMPT_CEILING:
        if aux.get("unresolved"):
            return _unknown(run, "the attempt ceiling is spent and the last outcome is unknown", "RECONCILE")
        return run.terminal("FAILED_NO_EFFECT", "the attempt ceiling is spent; nothing was executed",
                            next_owner="operator", action="STOP")
    deadline = run.intake.get("deadline")
    if deadline is not None and now >= deadline:
        if aux.get("unresolved"):
            return _unknown(run, "the deadline passed while the outcome is unknown", "RECONCILE")
        return run.terminal("FAILED_NO_EFFECT", "the deadline passed before the request could be sent")
    # the last checks before the send: the inbox, then our own lease
    events = run.inbox()
    if events is not None and any(ev.get("type") == "cancel" for ev in events):
        run.cancel = next(ev for ev in events if ev.get("type") == "cancel")
        return result("continue", note="cancel seen before the send")
    store.acquire()
    was_unresolved = bool(aux.get("unresolved"))
    aux.update(last_sent_scn=now, last_sent_real=time.time(), unresolved_before=was_unresolved, unresolved=True, read_first=False)
    store.set_aux(run.key, aux)
    attempt = {"n": len(attempts) + 1, "at": now, "owner": run.worker, "epoch": run.epoch}
    store.append(run.entry(run.key, "SENT_UNKNOWN", attempts=attempts + [attempt]))
    body = {"intent": run.intent, "retry_owner": "caller"}
    if prof.get("fencing"):
        body["fence"] = run.epoch
    out = run.http.request("POST", f"/{run.service}/{run.operation}", body=body, key=run.key)
    end = run.now()
    if out.kind == "ok":
        run.observe(out.body.get("committed_at"))
        store.append(run.entry(run.key, "CONFIRMED", remote_ref=out.body.get("ref"),
                               observations=[_obs(out)], evidence=[f"answer {out.body.get('ref')}"]))
        aux.update(unresolved=False)
        store.set_aux(run.key, aux)
        return result("continue")
    aux["last_end_scn"], aux["last_end_real"] = end, time.time()
    if out.kind == "ambiguous":
        store.set_aux(run.key, aux)
        return result("continue", note=f"ambiguous: {out}")
    # definite answers
    if out.code == "fenced":
        raise Stale("the service fenced our epoch")
    if out.code in NOT_EXECUTED:
        aux["unresolved"] = was_unresolved
        if out.code == "conflict_in_flight":
            aux["read_first"] = True
        wait = out.retry_after_ms if out.retry_after_ms is not None else run.real_s(5_000) * 1000
        aux["not_before_real"] = time.time() + wait / 1000.0
        if not was_unresolved:
            store.append(run.entry(run.key, "PROPOSED", observations=[_obs(out)],
                                   note=f"{out.code}: this request was not executed"))
        store.set_aux(run.key, aux)
        return result("wait", wait / 1000.0, f"{out.code}")
    if out.code == "intent_mismatch" or out.code in REFUSED:
        aux.update(unresolved=was_unresolved, next_owner="operator",
                   reason=f"the service refused the request ({out.code}); nothing more is sent under this key")
        store.set_aux(run.key, aux)
        if was_unresolved:
            return _unknown(run, aux["reason"], "STOP")
        store.append(run.entry(run.key, "REJECTED", observations=[_obs(out)], note=out.code))
        return result("continue")
    aux["unresolved"] = True
    store.set_aux(run.key, aux)
    return result("continue", note=f"unclassified definite answer {out}")


def notify_phase(run):
    store = run.store
    e = store.latest(run.msg_key)
    if e is None:
        store.append(run.entry(run.msg_key, "PROPOSED", note="the user notification, its own effect"))
        return result("continue")
    k = e["knowledge"]
    if k == "CONFIRMED":
        return run.terminal("SUCCEEDED", "the hold and the user notification are recorded")
    if k == "SENT_UNKNOWN":
        return run.terminal("SUCCEEDED", "the hold is recorded; whether the user notification arrived is "
                            "unknown and it is not sent again without a check", next_owner="operator",
                            action="STOP")
    if k == "REJECTED":
        return run.terminal("SUCCEEDED", "the hold is recorded; the notification service refused the message",
                            next_owner="operator", action="STOP")
    aux = store.aux(run.msg_key)
    now = run.now()
    if aux.get("not_before_real", 0) > time.time():
        return result("wait", aux["not_before_real"] - time.time())
    if len(e.get("attempts", [])) >= ATTEMPT_CEILING:
        return run.terminal("SUCCEEDED", "the hold is recorded; the notification could not be sent",
                            next_owner="operator", action="STOP")
    store.acquire()
    attempt = {"n": len(e.get("attempts", [])) + 1, "at": now, "owner": run.worker, "epoch": run.epoch}
    store.append(run.entry(run.msg_key, "SENT_UNKNOWN", attempts=e.get("attempts", []) + [attempt]))
    out = run.http.request("POST", "/notification/send", body={"intent": run.msg_intent, "retry_owner": "caller"},
                           key=run.msg_key)
    if out.kind == "ok":
        store.append(run.entry(run.msg_key, "CONFIRMED", remote_ref=out.body.get("message_id"),
                               observations=[_obs(out)]))
        return result("continue")
    if out.kind == "ambiguous":
        return result("continue", note=f"notification ambiguous: {out}")
    if out.code in NOT_EXECUTED:
        wait = out.retry_after_ms if out.retry_after_ms is not None else run.real_s(5_000) * 1000
        aux["not_before_real"] = time.time() + wait / 1000.0
        store.set_aux(run.msg_key, aux)
        store.append(run.entry(run.msg_key, "PROPOSED", observations=[_obs(out)]))
        return result("wait", wait / 1000.0)
    store.append(run.entry(run.msg_key, "REJECTED", observations=[_obs(out)], note=out.code or ""))
    return result("continue")
