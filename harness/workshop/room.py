"""Room state held on the facilitator's side: issued identities and each learner's signed record.

``crashlab workshop room ROOM/ --add ana`` makes the room's key (``ROOM/.crashlab-room/key``,
readable by its owner only), derives ana's secret from it, writes ana's identity
(``ROOM/ana/.crashlab-learner.json``: her name, her folder, the room, her secret) and opens her
record (``ROOM/.crashlab-room/records/ana.jsonl``) with a line signed by the room's key.

From then on every command run with that identity (``start``, ``check``, ``reveal``, a report
that shows a teaching card) appends what it changed to her record, each line numbered, chained
to the one before, signed with her secret and naming the folder it ran in; her state (kits,
attempts, tries, hints, reveals, holds) is read back from the record (an issued learner has no
progress file). The record only grows: a try is never taken back, a reveal never undone; only a
line signed with the room's key (``release``, the facilitator's) gives a held field its tries
back. Her kits are made from her secret, not her name, so the same name started elsewhere is
another kit.

``workshop class`` reads the records, not the progress files: it checks each line's number,
chain and signature (the secret derived again from the room's key), names commands run in
another folder than the one issued, a folder that holds another learner's identity, and a
record that shrank or changed since the last ``class`` (the heads it saw are kept beside the
key). What this guards against, and what it cannot on one machine under one account:
docs/workshop.md.
"""
from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from pathlib import Path

from ..vocab.errors import UsageError
from ..vocab.files import atomic_write_text

STATE = ".crashlab-room"          # the facilitator's side of the room (a folder)
IDENTITY = ".crashlab-learner.json"
KEY = "key"
RECORDS = "records"
SEEN = "seen.json"
ISSUED = "issued.json"            # the names issued, beside the key: a deleted record is still listed
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


# --------------------------------------------------------------------------- keys and secrets
def _body(entry: dict) -> bytes:
    return json.dumps({k: v for k, v in entry.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":")).encode("utf-8")


def _mac(key: bytes, entry: dict) -> str:
    return hmac.new(key, _body(entry), hashlib.sha256).hexdigest()


def state_dir(room: Path) -> Path:
    return Path(room) / STATE


def is_issued_room(room: Path) -> bool:
    return (state_dir(room) / KEY).exists()


def room_key(room: Path, *, create: bool = False) -> bytes:
    """The room's key: only the facilitator's folder holds it (mode 0600)."""
    p = state_dir(room) / KEY
    if not p.exists() and create:
        (p.parent / RECORDS).mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32) + "\n")
    try:
        return bytes.fromhex(p.read_text(encoding="ascii").strip())
    except FileNotFoundError:
        raise UsageError(f"{p}: no room key here; the facilitator issues identities with "
                         f"`crashlab workshop room {room} --add NAME`") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{p}: the room's key cannot be read ({exc}); only the facilitator's "
                         "account reads it") from None


def secret_of(key: bytes, name: str) -> str:
    return hmac.new(key, f"learner\0{name}".encode("utf-8"), hashlib.sha256).hexdigest()


def variant_of(secret: str) -> str:
    """The kit's variation: made from the learner's secret, so a name alone does not give it."""
    return "issued " + hashlib.sha256(f"kit\0{secret}".encode("ascii")).hexdigest()[:24]


def record_path(room: Path, name: str) -> Path:
    return state_dir(room) / RECORDS / f"{name}.jsonl"


# --------------------------------------------------------------------------- issuing
def issue(room: Path, name: str) -> list[str]:
    """``room ROOM --add NAME``: the identity in ROOM/NAME, the record's first line (signed with
    the room's key); -> what to tell the learner. Issuing a name again keeps its record."""
    room = Path(room).resolve()
    if not NAME.match(name):
        raise UsageError(f"--add {name!r}: a learner's name is letters, digits, '.', '_' or '-' "
                         "(at most 40), e.g. --add ana")
    key = room_key(room, create=True)
    folder = room / name
    folder.mkdir(exist_ok=True)
    identity = {"name": name, "room": str(room), "folder": str(folder), "secret": secret_of(key, name)}
    atomic_write_text(folder / IDENTITY, json.dumps(identity, indent=2, sort_keys=True) + "\n")
    rec = record_path(room, name)
    if not rec.exists():
        _append(rec, key, {"by": "facilitator", "folder": str(folder), "change": {"issued": name}})
    names = sorted({*_issued_names(room), name})
    atomic_write_text(state_dir(room) / ISSUED, json.dumps(names) + "\n")
    return [f"issued {name}: {folder} (identity {IDENTITY}; record {rec.relative_to(room)})",
            f"  {name} runs: cd {folder} && crashlab workshop start t1"]


def identity_at(start: Path) -> tuple[Path, dict] | None:
    """(the folder holding it, the identity) for a learner working in ``start`` or below it."""
    for folder in (Path(start).resolve(), *Path(start).resolve().parents):
        p = folder / IDENTITY
        if p.is_file():
            try:
                doc = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"{p}: unreadable identity ({exc}); ask the facilitator to issue it "
                                 "again (`crashlab workshop room ROOM --add NAME`)") from None
            if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str)
                                                    for k in ("name", "room", "folder", "secret")):
                raise UsageError(f"{p}: not a crashlab workshop identity; ask the facilitator to issue it again")
            return folder, doc
    return None


# --------------------------------------------------------------------------- the record
@contextlib.contextmanager
def _locked(path: Path):
    import fcntl
    with open(path, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _append(path: Path, key: bytes, entry: dict) -> None:
    with _locked(path) as fh:
        lines = [line for line in fh.read().splitlines() if line.strip()]
        try:
            prev = json.loads(lines[-1]).get("mac", "") if lines else ""
        except (json.JSONDecodeError, AttributeError):
            prev = ""
        entry = {**entry, "n": len(lines), "prev": prev, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        entry["mac"] = _mac(key, entry)
        fh.write(json.dumps(entry, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _record_of(identity: dict) -> Path:
    rec = record_path(Path(identity["room"]), identity["name"])
    if not rec.is_file():
        raise UsageError(f"{rec}: {identity['name']}'s record in the room is not reachable from here; work in "
                         f"the folder the facilitator issued ({identity['folder']})")
    return rec


def read_entries(path: Path) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"{path}: unreadable record ({exc})") from None
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            e = {"_bad": f"line {i} is not JSON"}
        out.append(e if isinstance(e, dict) else {"_bad": f"line {i} is not an entry"})
    return out


def verify(entries: list[dict], key: bytes, name: str) -> tuple[list[dict], list[str]]:
    """(the lines that count, the problems): a line counts when its number, its chain and its
    signature hold (the learner's lines signed with their secret, the facilitator's with the key).
    Nothing after the first broken line counts (the record was changed there)."""
    secret = secret_of(key, name).encode("ascii")
    good, problems, prev = [], [], ""
    for i, e in enumerate(entries):
        signer = key if e.get("by") == "facilitator" else secret
        why = (e.get("_bad")
               or (f"line {i + 1} is not chained to the line before (a line was removed or changed)"
                   if e.get("prev") != prev else None)
               or (f"line {i + 1} is numbered {e.get('n')}, not {i}" if e.get("n") != i else None)
               or (f"line {i + 1}'s signature does not hold (written by hand, or with another key)"
                   if not hmac.compare_digest(str(e.get("mac")), _mac(signer, e)) else None)
               or (f"line {i + 1} is not the facilitator's issue"
                   if i == 0 and (e.get("change") or {}).get("issued") != name else None))
        if why:
            problems.append(f"record changed by hand: {why}; {len(entries) - i} line(s) from there not counted")
            break
        good.append(e)
        prev = e["mac"]
    return good, problems


def _blank() -> dict:
    return {"status": "not started", "attempts": 0, "hints": 0, "kit": None, "revealed": False}


def _list(value) -> list:
    return [v for v in value if isinstance(v, (str, dict))] if isinstance(value, list) else []


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fold(entries: list[dict]) -> dict:
    """The rungs' state from a record. Counts only grow; a try or a reveal is never taken back;
    a release counts only when the facilitator signed it. A value of the wrong shape counts for
    nothing (the roster verifies every line before it folds them)."""
    from .ladder import rungs as ladder
    known = {r.id for r in ladder()}
    out: dict = {}
    for e in entries:
        rung_id, c = e.get("rung"), e.get("change") or {}
        if rung_id not in known or not isinstance(c, dict):
            continue
        r = out.setdefault(rung_id, _blank())
        if isinstance(c.get("kit"), str):
            r["kit"] = c["kit"]
        if isinstance(c.get("code"), dict):
            r["code"] = c["code"]
        if c.get("status") in ("started", "attempted", "passed") and r.get("status") != "passed":
            r["status"] = c["status"]
        for k in ("attempts", "hints"):
            r[k] = r.get(k, 0) + _count(c.get(k))
        hints = r.setdefault("field_hints", [])
        hints.extend(f for f in _list(c.get("field_hints")) if isinstance(f, str) and f not in hints)
        tries = c.get("tries") if isinstance(c.get("tries"), dict) else {}
        for field, values in tries.items():
            seen = r.setdefault("tries", {}).setdefault(str(field), [])
            seen.extend(v for v in _list(values) if isinstance(v, str) and v not in seen)
        if c.get("revealed") is True and not r.get("revealed"):
            r["revealed"], r["revealed_after_pass"] = True, c.get("revealed_after_pass") is True
        if _list(c.get("shown")):
            r.setdefault("shown", []).extend(x for x in _list(c["shown"]) if isinstance(x, dict))
        if e.get("by") == "facilitator":
            for field in _list(c.get("released")):
                (r.get("tries") or {}).pop(field, None)
                r.setdefault("released", []).append(field)
    return out


def _diff(old: dict, new: dict) -> dict:
    c: dict = {}
    for k in ("kit", "status", "code"):
        if new.get(k) != old.get(k) and new.get(k) is not None:
            c[k] = new[k]
    for k in ("attempts", "hints"):
        if int(new.get(k) or 0) > int(old.get(k) or 0):
            c[k] = int(new[k]) - int(old.get(k) or 0)
    added = [f for f in new.get("field_hints") or () if f not in (old.get("field_hints") or ())]
    if added:
        c["field_hints"] = added
    tries = {f: [v for v in vs if v not in ((old.get("tries") or {}).get(f) or ())]
             for f, vs in (new.get("tries") or {}).items()}
    if any(tries.values()):
        c["tries"] = {f: vs for f, vs in tries.items() if vs}
    if new.get("revealed") and not old.get("revealed"):
        c["revealed"], c["revealed_after_pass"] = True, bool(new.get("revealed_after_pass"))
    shown = list(new.get("shown") or ())[len(old.get("shown") or ()):]
    if shown:
        c["shown"] = shown
    released = list(new.get("released") or ())[len(old.get("released") or ()):]
    if released:
        c["released"] = released
    return c


# --------------------------------------------------------------------------- the learner's side
_HELD: dict[str, object] = {}     # record -> the open lock file this process holds for it


def _hold(rec: Path) -> None:
    """One command at a time per learner, wherever it runs (a copy of the folder, a scratch
    folder): from reading the record to appending to it, so six checks at once count as six
    tries in turn, not six first tries. Released when the command appends or its process ends."""
    import fcntl
    key = str(rec)
    if key not in _HELD:
        fh = open(rec.with_suffix(".lock"), "a")        # noqa: SIM115 - held until save or exit
        fcntl.flock(fh, fcntl.LOCK_EX)
        _HELD[key] = fh


def _let_go(rec: Path) -> None:
    fh = _HELD.pop(str(rec), None)
    if fh is not None:
        fh.close()


_IN_COMMAND: list[bool] = []


@contextlib.contextmanager
def one_command():
    """A workshop command (cli.run): a learner's record is held from the command's first read
    to its append (``_hold``), and every hold is released when the command ends."""
    _IN_COMMAND.append(True)
    try:
        yield
    finally:
        _IN_COMMAND.pop()
        for key in list(_HELD):
            _let_go(Path(key))


def load(start: Path) -> dict | None:
    """A learner's state read from their record (None when ``start`` holds no identity)."""
    found = identity_at(start)
    if found is None:
        return None
    _, identity = found
    rec = _record_of(identity)
    if _IN_COMMAND:
        _hold(rec)
    entries = read_entries(rec)
    return {"learner": identity["name"], "variant": variant_of(identity["secret"]),
            "rungs": fold([e for e in entries if "_bad" not in e]), "issued": identity["name"]}


def save(start: Path, data: dict) -> None:
    """Append what a command changed (against the record as it stands) to the learner's record,
    signed with their secret; a release is signed with the room's key (the facilitator's)."""
    found = identity_at(start)
    if found is None:
        raise UsageError(f"{start}: the learner's identity has gone; ask the facilitator to issue it again")
    where, identity = found
    rec = _record_of(identity)
    before = fold([e for e in read_entries(rec) if "_bad" not in e])
    for rung_id, e in sorted(data["rungs"].items()):
        old = before.get(rung_id) or _blank()
        c = _diff(old, e)
        released = c.pop("released", None)
        if released:
            key = room_key(Path(identity["room"]))     # the facilitator's: without it, no release
            _append(rec, key, {"by": "facilitator", "folder": str(where), "rung": rung_id,
                               "change": {"released": released}})
        if c:
            _append(rec, identity["secret"].encode("ascii"), {"by": identity["name"], "folder": str(where),
                                                              "rung": rung_id, "change": c})
    _let_go(rec)


# --------------------------------------------------------------------------- the facilitator's side
def _issued_names(room: Path) -> list[str]:
    try:
        names = json.loads((state_dir(room) / ISSUED).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return [n for n in names if isinstance(n, str) and NAME.match(n)] if isinstance(names, list) else []


def issued(room: Path) -> list[str]:
    """Every name issued (the facilitator's list) and every record in the room."""
    d = state_dir(room) / RECORDS
    return sorted({*_issued_names(room), *(p.stem for p in d.glob("*.jsonl"))})


def learner(room: Path, name: str, key: bytes, seen: dict) -> tuple[dict, list[str], str | None]:
    """(data as progress.load gives it, notes for the roster, what is wrong with the record) for
    one issued learner, from the record only; ``seen`` (the heads the last class saw) is updated.
    A record changed by hand or rewound is not graded: the roster says so instead."""
    room = Path(room).resolve()
    if not record_path(room, name).is_file():
        return {"learner": name, "rungs": {}, "issued": name}, [], f"{name}'s record is gone (deleted)"
    good, problems = verify(read_entries(record_path(room, name)), key, name)
    notes: list[str] = []
    was = seen.get(name) if isinstance(seen.get(name), dict) else {}
    n = _count(was.get("n"))
    if n and (len(good) < n or good[n - 1]["mac"] != was.get("head")):
        problems.append(f"record rewound: the last `class` saw {n} lines, {len(good)} agree with it now")
    else:
        seen[name] = {"n": len(good), "head": good[-1]["mac"] if good else ""}
    folder = room / name
    for other in sorted({e["folder"] for e in good if e.get("folder") and e["folder"] != str(folder)}):
        what = sorted({f"{k} {e['rung']}" for e in good if e.get("folder") == other and e.get("rung")
                       for k in (e.get("change") or {}) if k in ("kit", "attempts", "revealed", "shown")})
        notes.append(f"commands run outside {name}'s folder, in {other}: "
                     + ", ".join(w.replace("kit ", "start ").replace("attempts ", "check ").replace("revealed ", "reveal ") for w in what))
    found = identity_at(folder) if folder.is_dir() else None
    if found is None or found[0] != folder:
        notes.append(f"{folder} holds no identity of {name}'s")
    elif found[1].get("name") != name or found[1].get("secret") != secret_of(key, name):
        notes.append(f"{folder} holds {found[1].get('name')}'s identity, not {name}'s (a copied folder)")
    return ({"learner": name, "variant": variant_of(secret_of(key, name)), "rungs": fold(good),
             "issued": name}, notes, "; ".join(problems) or None)


def load_seen(room: Path) -> dict:
    p = state_dir(room) / SEEN
    try:
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
    except (OSError, json.JSONDecodeError):
        return {}


def save_seen(room: Path, seen: dict) -> None:
    atomic_write_text(state_dir(room) / SEEN, json.dumps(seen, indent=2, sort_keys=True) + "\n")
