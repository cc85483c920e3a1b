// A Go integration worker: net/http and database/sql on SQLite (github.com/mattn/go-sqlite3).
//
//	go build -tags libsqlite3 -o worker worker.go    (Debian: golang-go golang-github-mattn-go-sqlite3-dev,
//	                                                  GOPATH=/usr/share/gocode GO111MODULE=off)
//	crashlab integrate --suite --worker './worker {url} {db}'
//	crashlab integrate matrix-weak-service --worker './worker -client=default {url} {db}'
//
// The same discipline as examples/integration/worker.py: prepare with a stable key, SENT_UNKNOWN before
// every send, an ambiguous outcome resolved only by an authoritative read, never a blind resend.
//
// Approvals: before anything is prepared the worker asks the sandbox's authority whether an approval bound
// to the proposal's hash is live. A run with a standing approval goes on at once; otherwise it requests one
// and waits durably (WAITING_HUMAN, next owner the approver): crashlab starts the run's next worker when the
// approval (or anything else) reaches its inbox. Before every send it asks again; a revoked approval, or a
// policy that denies it, ends the run with nothing sent (FAILED_NO_EFFECT).
//
// -client=default uses http.DefaultClient as it comes. Its transport keeps connections alive and, when
// a reused connection is closed before any answer, silently re-sends a request that carries an
// Idempotency-Key header (net/http's "replayable" rule): a second retry owner the worker never sees.
// Against a lost response on a service that keeps no keys, that is two commits while the worker saw one
// 200; crashlab sees both requests at the sandbox. -client=careful (the default) opens a connection per
// request, so every retry is the worker's own.
package main

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// ---------------------------------------------------------------- failpoint helper
var fpCounts = map[string]int{}

func failpoint(point, boundary string) {
	if boundary == "before" {
		fpCounts[point]++
	}
	for _, item := range strings.Split(os.Getenv("CRASHLAB_FAILPOINT"), ",") {
		parts := strings.Split(item, ":")
		if len(parts) == 3 && parts[0] == point && parts[1] == strconv.Itoa(fpCounts[point]) && parts[2] == boundary {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}

// ---------------------------------------------------------------- the store
const schema = `
CREATE TABLE IF NOT EXISTS checkpoints (version INTEGER PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS finish (seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS crashlab_checkpoints AS SELECT version, record FROM checkpoints;
CREATE VIEW IF NOT EXISTS crashlab_ledger AS SELECT seq, record FROM ledger;
CREATE VIEW IF NOT EXISTS crashlab_finish AS SELECT seq, record FROM finish;
CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch INTEGER NOT NULL,
                                  owner TEXT NOT NULL, expires REAL NOT NULL);`

type M = map[string]any

type worker struct {
	db               *sql.DB
	client           *http.Client
	base             string
	name, run        string
	epoch            int
	intent           M
	notify           bool   // the run asks for the user notification: a separate effect
	noticeKey        string // its own identity
	notice           string // its knowledge
	noticeIntent     M
	key, state, know string
	phash            string // the proposal's hash (the action and the intent): the approval is bound to it
	seen             int
	duplicates       []any // every later delivery of an event id already seen, with its disposition
	lookup           string
	fencing          bool    // the service checks the lease epoch as a fencing token
	bound            float64 // the service's late-delivery bound, in seconds
	ttl              float64 // the lease's time to live, in seconds
	versions         M       // the versions crashlab gives this worker (CRASHLAB_<NAME>; 1 when absent)
	contract         M       // the versions its checkpoints are written under
	readsOldSchema   bool    // the mistake: after a deployment, read the old checkpoint as this version's own
	deadline         any     // the intake's business deadline (scenario ms), kept in every checkpoint
	compensation     bool    // the service offers a compensation (a release)
	relKey, rel      string  // the compensation's own identity, and its knowledge
	relIntent        M       // what it releases
	relHash          string  // its own proposal's hash: its approval is bound to it
	releaseUnchecked bool    // the mistake: release without an approval of the release's own
}

// versionKeys are the versions a deployment may change; contractKeys those whose change can make an old
// checkpoint mean something else (the code version cannot).
var versionKeys = []string{"code_version", "schema_version", "canonicalization_version", "policy_version", "capability_version"}
var contractKeys = versionKeys[1:]

// migrations: "version:from:to" -> what the tested migration changes (the only one this worker has).
var migrations = map[string]string{"schema_version:1:2": "contract.schema_version: 1 -> 2 (the same fields, kept as they were)"}

func versionsFromEnv() M {
	out := M{}
	for _, k := range versionKeys {
		n, err := strconv.Atoi(os.Getenv("CRASHLAB_" + strings.ToUpper(k)))
		if err != nil {
			n = 1
		}
		out[k] = float64(n) // as JSON numbers read back
	}
	return out
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

var terminal = map[string]bool{"SUCCEEDED": true, "FAILED_NO_EFFECT": true, "FAILED_EFFECT_REMAINS": true,
	"FAILED_EFFECT_UNKNOWN": true, "CANCELLED_NO_EFFECT": true, "CANCELLED_EFFECT_REMAINS": true,
	"CANCELLED_EFFECT_UNKNOWN": true}

// stale stops a worker that finds a newer epoch holding the run's lease: it writes and sends nothing more.
func stale(why string) {
	fmt.Fprintln(os.Stderr, "stopping:", why)
	os.Exit(0)
}

// acquire takes the run's lease once the previous holder's has expired (a crashed or paused holder keeps
// it until then); a newer epoch there already means this worker is stale.
func (w *worker) acquire(ttl float64) {
	w.ttl = ttl
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		res, err := w.db.Exec(`INSERT INTO lease (id, epoch, owner, expires) VALUES (1, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch, owner = excluded.owner, expires = excluded.expires
			WHERE lease.epoch = excluded.epoch OR (lease.expires < ? AND lease.epoch < excluded.epoch)`,
			w.epoch, w.name, now()+ttl, now())
		if err == nil {
			if n, _ := res.RowsAffected(); n == 1 {
				return
			}
		}
		var held int
		if w.db.QueryRow("SELECT epoch FROM lease WHERE id = 1").Scan(&held) == nil && held > w.epoch {
			stale(fmt.Sprintf("epoch %d holds the run", held))
		}
	}
	stale("the previous holder's lease never expired")
}

// own confirms (and renews) the lease right before a send.
func (w *worker) own() {
	res, err := w.db.Exec("UPDATE lease SET expires = ? WHERE id = 1 AND epoch = ?", now()+w.ttl, w.epoch)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		stale("a newer worker holds the run")
	}
}

// write appends a row, fenced: it lands only while this worker's epoch holds the lease.
func (w *worker) write(point, table string, record M) {
	data, _ := json.Marshal(record)
	failpoint(point, "before")
	res, err := w.db.Exec("INSERT INTO "+table+" (record) SELECT ? WHERE (SELECT epoch FROM lease WHERE id = 1) = ?",
		string(data), w.epoch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		os.Exit(4)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		stale("a newer worker holds the run")
	}
	failpoint(point, "after")
}

func (w *worker) effects() []M {
	effects := []M{}
	if w.know != "" {
		effects = append(effects, M{"key": w.key, "knowledge": w.know})
	}
	if w.notice != "" {
		effects = append(effects, M{"key": w.noticeKey, "knowledge": w.notice})
	}
	if w.rel != "" {
		effects = append(effects, M{"key": w.relKey, "knowledge": w.rel})
	}
	return effects
}

// entries are the ledger entries of one key, in append order.
func (w *worker) entries(key string) []M {
	out := []M{}
	rows, err := w.db.Query("SELECT record FROM ledger ORDER BY seq")
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		var e M
		if rows.Scan(&text) == nil && json.Unmarshal([]byte(text), &e) == nil && e["semantic_key"] == key {
			out = append(out, e)
		}
	}
	return out
}

func (w *worker) knowledgeOf(key string) string {
	if es := w.entries(key); len(es) > 0 {
		k, _ := es[len(es)-1]["knowledge"].(string)
		return k
	}
	return ""
}

func (w *worker) checkpoint(state string) {
	var version int
	w.db.QueryRow("SELECT COUNT(*) FROM checkpoints").Scan(&version)
	effects := w.effects()
	w.write("checkpoints.write", "checkpoints", M{
		"identity": M{"run_id": w.run, "task_id": "task-" + w.run, "tenant": w.intent["tenant"], "principal": w.intent["principal"]},
		"control": M{"state": state, "state_version": version + 1, "owner": w.name, "lease_epoch": w.epoch,
			"event_sequence": w.seen, "cancellation": M{}, "deadline": w.deadline, "budgets": M{"attempt_ceiling": 5}},
		"contract": w.contractCopy(), "evidence": w.evidence(), "effects": effects})
	w.state = state
}

func (w *worker) contractFrom(v M) M {
	out := M{}
	for k, x := range v {
		out[k] = x
	}
	return out
}

func (w *worker) contractCopy() M { return w.contractFrom(w.contract) }

// compatible compares the run's latest checkpoint with this code's versions (AR-08, "Deployment
// compatibility"): true to go on (the same versions, or a tested migration done: a MIGRATING checkpoint with
// its record, then the pre-migration state under the new contract); false when the run is pinned to the old
// code (a PINNED finish naming the old versions: crashlab drains the run with --worker).
func (w *worker) compatible(cp M, version int) bool {
	if cp == nil || w.readsOldSchema {
		return true
	}
	contract, _ := cp["contract"].(M)
	old, from, to, changes, differing := M{}, M{}, M{}, []any{}, []string{}
	for _, k := range versionKeys {
		old[k] = w.versions[k]
		if v, ok := contract[k]; ok {
			old[k] = v
		}
	}
	tested := true
	for _, k := range contractKeys {
		from[k], to[k] = old[k], w.versions[k]
		if fmt.Sprint(old[k]) != fmt.Sprint(w.versions[k]) {
			differing = append(differing, k)
			change, ok := migrations[fmt.Sprintf("%s:%v:%v", k, old[k], w.versions[k])]
			tested = tested && ok
			changes = append(changes, change)
		}
	}
	if len(differing) == 0 {
		return true
	}
	previous := w.state
	if tested {
		var n int
		w.db.QueryRow("SELECT COUNT(*) FROM checkpoints").Scan(&n)
		w.write("checkpoints.write", "checkpoints", M{
			"identity": M{"run_id": w.run, "task_id": "task-" + w.run, "tenant": w.intent["tenant"], "principal": w.intent["principal"]},
			"control": M{"state": "MIGRATING", "state_version": n + 1, "owner": w.name, "lease_epoch": w.epoch,
				"event_sequence": w.seen, "cancellation": M{}, "deadline": w.deadline, "budgets": M{"attempt_ceiling": 5}},
			"contract": w.contractCopy(), "evidence": w.evidence(), "effects": w.effects(),
			"migration": M{"from": from, "to": to, "previous_version": version, "previous_state": previous,
				"changes": changes, "kept": []any{"approval binding (not refreshed)", "unresolved effects", "semantic keys"}}})
		w.checkpoint(previous)
		return true
	}
	w.contract = old // the run stays under the old versions: its checkpoint says so
	w.checkpoint("PINNED")
	w.write("run.finish", "finish", M{"disposition": "PINNED", "next_owner": "platform", "owner": w.name,
		"reason": "no tested migration for " + strings.Join(differing, ", ") + ": pinned to the old code",
		"effects": w.effects(), "packet": M{"pinned_env": old, "from": w.versions}})
	w.db.Exec("DELETE FROM lease WHERE id = 1 AND epoch = ?", w.epoch) // the pinned worker takes the run at once
	return false
}

// evidence is a checkpoint's evidence: every duplicate delivery seen so far, recorded with "no transition".
func (w *worker) evidence() M {
	if len(w.duplicates) == 0 {
		return M{"proposal_hash": w.phash}
	}
	return M{"proposal_hash": w.phash, "duplicates": w.duplicates}
}

func (w *worker) append(knowledge string, extra M) { w.appendEntry(false, knowledge, extra) }

// appendEntry appends a ledger entry for the reservation, or (notice) for the user notification.
func (w *worker) appendEntry(notice bool, knowledge string, extra M) {
	key, intent, service, op := w.key, w.intent, "reservation", "reserve"
	if notice {
		key, intent, service, op = w.noticeKey, w.noticeIntent, "notification", "send"
	}
	w.appendFor(key, intent, service, op, "effect", knowledge, extra)
	if notice {
		w.notice = knowledge
	} else {
		w.know = knowledge
	}
}

// appendRelease appends a ledger entry for the compensation that releases the hold.
func (w *worker) appendRelease(knowledge string, extra M) {
	w.appendFor(w.relKey, w.relIntent, "reservation", "release", "compensation", knowledge,
		merge(M{"compensates": w.key, "proposal_hash": w.relHash}, extra))
	w.rel = knowledge
}

func merge(a, b M) M {
	for k, v := range b {
		a[k] = v
	}
	return a
}

func (w *worker) appendFor(key string, intent M, service, op, kind, knowledge string, extra M) {
	data, _ := json.Marshal(intent)
	sum := sha256.Sum256(data)
	entry := M{"semantic_key": key, "kind": kind, "service": service, "operation": op,
		"run_id": w.run, "intent": intent, "intent_fingerprint": hex.EncodeToString(sum[:])[:16],
		"canonicalization_version": w.contract["canonicalization_version"], "knowledge": knowledge, "attempts": []M{}, "lease_epoch": w.epoch}
	if knowledge == "SENT_UNKNOWN" {
		entry["attempts"] = []M{{"at": float64(time.Now().UnixNano()) / 1e9}}
	}
	for k, v := range extra {
		entry[k] = v
	}
	w.write("ledger.append", "ledger", entry)
}

// sendNotice sends the user notification once: prepared, SENT_UNKNOWN before the send. The service has
// no read by key, so an unknown outcome stays unknown: never re-sent, never reported delivered.
func (w *worker) sendNotice() {
	if w.notice == "" {
		w.appendEntry(true, "PROPOSED", M{"note": "the notification, prepared"})
		w.checkpoint("NOTIFYING")
	}
	if w.notice != "PROPOSED" {
		return
	}
	if w.state != "NOTIFYING" {
		w.checkpoint("NOTIFYING")
	}
	w.appendEntry(true, "SENT_UNKNOWN", M{"note": "about to send"})
	w.own()
	status, data, _, err := w.call("POST", "/notification/send", M{"intent": w.noticeIntent, "retry_owner": "caller"}, w.noticeKey)
	if err != nil {
		return
	}
	if status == 200 {
		w.appendEntry(true, "CONFIRMED", M{"remote_ref": data["message_id"], "evidence": []any{"send answered 200"}})
	} else if status < 500 && status != 429 {
		w.appendEntry(true, "REJECTED", M{"evidence": []any{fmt.Sprintf("definite refusal: HTTP %d", status)}})
	}
}

func (w *worker) finish(disposition, reason string, nextOwner any) {
	w.checkpoint(disposition)
	w.write("run.finish", "finish", M{"disposition": disposition, "reason": reason, "next_owner": nextOwner, "effects": w.effects()})
}

// ---------------------------------------------------------------- HTTP
var errAmbiguous = errors.New("ambiguous")

func (w *worker) call(method, path string, body M, key string) (int, M, http.Header, error) {
	var reader io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		reader = bytes.NewReader(data) // rewindable: net/http may re-send it by itself
	}
	req, _ := http.NewRequest(method, w.base+path, reader)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %v", errAmbiguous, err)
	}
	defer resp.Body.Close()
	out := M{}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %v", errAmbiguous, err)
	}
	json.Unmarshal(data, &out)
	return resp.StatusCode, out, resp.Header, nil
}

func (w *worker) events() []any {
	_, data, _, err := w.call("GET", "/inbox?after_seq=0", nil, "")
	if err != nil {
		return nil
	}
	evs, _ := data["events"].([]any)
	w.seen = len(evs)
	// a duplicate delivery causes no transition; its disposition goes in every later checkpoint's evidence
	first, known := map[any]bool{}, map[any]bool{}
	for _, d := range w.duplicates {
		known[d.(M)["seq"]] = true
	}
	for _, e := range evs {
		ev, _ := e.(M)
		if first[ev["event_id"]] && !known[ev["seq"]] {
			w.duplicates = append(w.duplicates, M{"event_id": ev["event_id"], "seq": ev["seq"],
				"disposition": "duplicate: no transition"})
			known[ev["seq"]] = true
		}
		first[ev["event_id"]] = true
	}
	return evs
}

// authority is the authority's answer for this proposal (anything but a 200 is not live).
func (w *worker) authority() M { return w.authorityFor(w.phash, "reserve") }

// authorityFor is the authority's answer for a proposal's hash and action (the release's, say).
func (w *worker) authorityFor(phash, action string) M {
	query := url.Values{"proposal_hash": {phash}, "action": {action}}.Encode()
	status, data, _, err := w.call("GET", "/authority/check?"+query, nil, "")
	if err != nil {
		return M{"live": false, "reason": "no answer: " + err.Error()}
	}
	if status != 200 {
		return M{"live": false, "reason": fmt.Sprintf("HTTP %d", status)}
	}
	return data
}

// approved is true for a live approval bound to the proposal (APPROVED written). Otherwise the run ends or
// waits durably and it is false: revoked or denied ends it with nothing sent; none yet (or expired, or of an
// old capability version) asks for one and waits for it.
func (w *worker) approved() bool {
	answer := w.authority()
	if answer["live"] == true {
		w.checkpoint("APPROVED")
		return true
	}
	reason := fmt.Sprint(answer["reason"])
	if reason == "revoked" || reason == "denied by policy" {
		w.finish("FAILED_NO_EFFECT", "no authority for the proposal ("+reason+"); nothing was sent", "approver")
		return false
	}
	w.call("POST", "/authority/request", M{"proposal_hash": w.phash, "action": "reserve"}, "")
	w.finish("WAITING_HUMAN", "waiting for an approval of the proposal ("+reason+")", "approver")
	return false
}

func (w *worker) cancelled() bool {
	for _, e := range w.events() {
		if e.(M)["type"] == "cancel" {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------- the run
func (w *worker) lastSend() float64 {
	var at float64
	if es := w.entries(w.key); len(es) > 0 {
		for _, a := range es[len(es)-1]["attempts"].([]any) {
			if t, ok := a.(M)["at"].(float64); ok && t > at {
				at = t
			}
		}
	}
	return at
}

// reconcile resolves SENT_UNKNOWN by an authoritative read: the key (lookup), or the incident and slot
// compared on every intent field (search, conclusive only past the service's late-delivery bound).
func (w *worker) reconcile() {
	if w.lookup != "by_key" && w.lookup != "by_incident_slot" {
		w.finish("FAILED_EFFECT_UNKNOWN", "the service offers no authoritative read: the effect may exist", "operator")
		return
	}
	want, _ := json.Marshal(w.intent)
	sent := w.lastSend()
	for i := 0; i < 500; i++ {
		path := "/reservation/lookup?key=" + url.QueryEscape(w.key)
		if w.lookup == "by_incident_slot" {
			path = fmt.Sprintf("/reservation/search?incident=%s&slot=%s", url.QueryEscape(fmt.Sprint(w.intent["incident"])),
				url.QueryEscape(fmt.Sprint(w.intent["slot"])))
		}
		status, data, _, err := w.call("GET", path, nil, "")
		if err == nil && status == 200 {
			var found M
			settled := data["in_flight"] != true
			if w.lookup == "by_key" {
				found, _ = data["record"].(M)
				if got, _ := json.Marshal(found["intent"]); found != nil && !bytes.Equal(got, want) {
					// our key, someone else's parameters: not our effect, and ours may still exist
					w.finish("FAILED_EFFECT_UNKNOWN", fmt.Sprintf("the record under our key %v holds other parameters", found["ref"]), "operator")
					return
				}
			} else {
				for _, r := range data["records"].([]any) {
					got, _ := json.Marshal(r.(M)["intent"])
					if bytes.Equal(got, want) {
						found = r.(M)
					}
				}
				settled = float64(time.Now().UnixNano())/1e9-sent > w.bound
			}
			if found != nil {
				w.append("CONFIRMED", M{"remote_ref": found["ref"], "evidence": []any{fmt.Sprintf("%s read found %v", w.lookup, found["ref"])},
					"reconciliation": []M{{"query": w.lookup, "as_of": data["as_of"], "found": true}}})
				return
			}
			if settled && data["consistency"] == "strong" {
				w.append("PROPOSED", M{"evidence": []any{"authoritative absence: " + w.lookup + " read found nothing that can still land"},
					"reconciliation": []M{{"query": w.lookup, "as_of": data["as_of"], "found": false}}})
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.finish("FAILED_EFFECT_UNKNOWN", "the effect stayed unresolved", "operator")
}

func (w *worker) send() {
	w.own() // still the owner, right before the send
	// proposal_hash: the proposal this send carries out, the one the approval is bound to
	body := M{"intent": w.intent, "retry_owner": "caller", "proposal_hash": w.phash}
	if w.fencing {
		body["fence"] = w.epoch
	}
	status, data, headers, err := w.call("POST", "/reservation/reserve", body, w.key)
	if err != nil || status >= 500 {
		w.reconcile()
		return
	}
	errCode := ""
	if e, ok := data["error"].(M); ok {
		errCode, _ = e["code"].(string)
	}
	switch {
	case status == 200:
		w.append("CONFIRMED", M{"remote_ref": data["ref"], "evidence": []any{fmt.Sprintf("reserve answered 200 with %v", data["ref"])}})
		w.checkpoint("EFFECT_CONFIRMED")
	case status == 429:
		ms, _ := strconv.Atoi(headers.Get("Retry-After-Ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		w.append("PROPOSED", M{"evidence": []any{"429: throttled before execution (definite)"}})
	case status == 409 && errCode == "conflict_in_flight":
		w.reconcile()
	case errCode == "fenced": // a newer worker's epoch reached the service first
		stale("the service fenced this worker's epoch")
	default:
		w.append("REJECTED", M{"evidence": []any{fmt.Sprintf("definite refusal: HTTP %d %s", status, errCode)}})
		w.finish("FAILED_NO_EFFECT", "the service refused the request: "+errCode, nil)
	}
}

func (w *worker) main() int {
	if _, err := w.db.Exec(schema); err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		return 4
	}
	// the run ended: a terminal finish row (a durable wait is woken by a new worker)
	var last string
	if w.db.QueryRow("SELECT record FROM finish ORDER BY seq DESC LIMIT 1").Scan(&last) == nil {
		var row M
		if json.Unmarshal([]byte(last), &row) == nil && terminal[fmt.Sprint(row["disposition"])] {
			return 0
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.intent == nil && time.Now().Before(deadline) {
		for _, e := range w.events() {
			if ev := e.(M); ev["type"] == "intake" {
				w.intent = ev["payload"].(M)["intent"].(M)
				w.notify = ev["payload"].(M)["notify"] == true
				w.deadline = ev["payload"].(M)["deadline"]
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w.intent == nil {
		fmt.Fprintln(os.Stderr, "no intake event arrived")
		return 3
	}
	data, _ := json.Marshal(w.intent) // encoding/json sorts map keys: a canonical form
	sum := sha256.Sum256(data)
	w.key = "rsv-" + hex.EncodeToString(sum[:])[:20]
	proposal, _ := json.Marshal(M{"action": "reserve", "intent": w.intent})
	psum := sha256.Sum256(proposal)
	w.phash = "sha256:" + hex.EncodeToString(psum[:])
	w.noticeKey = "msg-" + w.key[4:]
	w.relKey = "rel-" + w.key[4:] // the compensation: its own identity, proposal and approval
	w.relIntent = M{"tenant": w.intent["tenant"], "principal": w.intent["principal"], "releases": w.key}
	relProposal, _ := json.Marshal(M{"action": "release", "intent": w.relIntent})
	rsum := sha256.Sum256(relProposal)
	w.relHash = "sha256:" + hex.EncodeToString(rsum[:])
	w.noticeIntent = M{"tenant": w.intent["tenant"], "to": w.intent["technician"],
		"message": fmt.Sprintf("part %v reserved for %v", w.intent["part"], w.intent["incident"])}
	_, profile, _, _ := w.call("GET", "/reservation", nil, "")
	scale, _ := profile["time_scale"].(float64)
	if scale <= 0 {
		scale = 1
	}
	w.acquire(30 / scale) // 30 s of scenario time: one owner at a time
	w.lookup, _ = profile["lookup"].(string)
	w.fencing, _ = profile["fencing"].(bool)
	w.compensation = profile["compensation"] != nil && profile["compensation"] != false
	if ms, ok := profile["max_delivery_delay_ms"].(float64); ok {
		w.bound = ms / 1000
	}

	var text string
	var cp M
	cpVersion := 0
	w.state = "INTAKE"
	if w.db.QueryRow("SELECT version, record FROM checkpoints ORDER BY version DESC LIMIT 1").Scan(&cpVersion, &text) == nil {
		json.Unmarshal([]byte(text), &cp)
		w.state = cp["control"].(M)["state"].(string)
	}
	w.know, w.notice, w.rel = w.knowledgeOf(w.key), w.knowledgeOf(w.noticeKey), w.knowledgeOf(w.relKey)
	if terminal[w.state] {
		w.write("run.finish", "finish", M{"disposition": w.state, "reason": "recorded before a crash", "next_owner": nil,
			"effects": w.effects()})
		return 0
	}
	if !w.compatible(cp, cpVersion) {
		return 0
	}
	if w.know == "COMPENSATION_PROPOSED" { // a restart while compensating
		w.compensate()
		return 0
	}
	if w.know == "" {
		if w.cancelled() {
			w.finish("CANCELLED_NO_EFFECT", "cancelled before anything was prepared", nil)
			return 0
		}
		order := []string{"INTAKE", "VALIDATED", "PROPOSED"}
		for i, s := range order {
			if s == w.state {
				for _, next := range order[i+1:] {
					w.checkpoint(next)
				}
			}
		}
		if !w.approved() {
			return 0
		}
		w.append("PROPOSED", M{"note": "prepared before any send"})
		w.checkpoint("EFFECT_PREPARED")
	}
	if w.know == "SENT_UNKNOWN" {
		w.reconcile()
	}
	for attempts := 1; w.know == "PROPOSED"; attempts++ {
		if w.cancelled() {
			w.append("REJECTED", M{"evidence": []any{"cancelled; no attempt left the worker"}})
			w.finish("CANCELLED_NO_EFFECT", "cancelled before the send", nil)
			return 0
		}
		if w.authority()["live"] != true { // right before every send
			w.append("REJECTED", M{"evidence": []any{"the approval is no longer live; nothing left the worker since the last authoritative absence"}})
			w.finish("FAILED_NO_EFFECT", "the approval is no longer live; nothing was sent", "approver")
			return 0
		}
		if attempts > 5 {
			w.append("REJECTED", M{"evidence": []any{"every attempt was refused before execution"}})
			w.finish("FAILED_NO_EFFECT", "attempt ceiling reached", nil)
			return 0
		}
		w.append("SENT_UNKNOWN", M{"note": "about to send"})
		if w.state != "EFFECT_IN_FLIGHT" {
			w.checkpoint("EFFECT_IN_FLIGHT")
		}
		w.send()
	}
	if w.know == "CONFIRMED" && !terminal[w.state] {
		if w.state != "EFFECT_CONFIRMED" && w.state != "NOTIFYING" { // a restart while notifying stays there
			w.checkpoint("EFFECT_CONFIRMED")
		}
		if w.cancelled() && w.compensation {
			w.compensate()
		} else if w.cancelled() {
			w.finish("CANCELLED_EFFECT_REMAINS", "cancelled after the hold was confirmed; it remains", "requester")
		} else {
			var nextOwner any
			if w.notify {
				w.sendNotice()
				if w.notice == "SENT_UNKNOWN" {
					nextOwner = "operator"
				}
			}
			w.finish("SUCCEEDED", "the hold is confirmed by the service", nextOwner)
		}
	}
	return 0
}

// ---------------------------------------------------------------- compensation
// compensate releases the confirmed hold the cancellation no longer wants: a separate effect with its own key,
// proposal and approval, prepared and recorded before it is sent, verified by a read of the original's key.
func (w *worker) compensate() {
	var ref any
	for _, e := range w.entries(w.key) {
		if e["remote_ref"] != nil {
			ref = e["remote_ref"]
		}
	}
	if w.rel == "" {
		if !w.releaseAuthorized() {
			return
		}
		w.appendRelease("PROPOSED", M{"note": "the release, prepared"})
		w.append("COMPENSATION_PROPOSED", M{"remote_ref": ref, "note": "compensation " + w.relKey + " proposed"})
	}
	if w.state != "COMPENSATING" {
		w.checkpoint("COMPENSATING")
	}
	for i := 0; i < 5; i++ {
		if w.rel == "PROPOSED" {
			if !w.releaseUnchecked && w.authorityFor(w.relHash, "release")["live"] != true { // right before the send
				w.released("REJECTED", "the release's approval is no longer live; nothing was sent", ref)
				return
			}
			w.appendRelease("SENT_UNKNOWN", M{"note": "about to send the release"})
			w.own()
			status, _, _, err := w.call("POST", "/reservation/release",
				M{"ref": ref, "retry_owner": "caller", "proposal_hash": w.relHash}, w.relKey)
			if err == nil && status < 500 && status != 200 && status != 429 {
				w.released("REJECTED", fmt.Sprintf("the release was refused: HTTP %d", status), ref)
				return
			}
		}
		switch w.verifyRelease() {
		case "released":
			w.released("CONFIRMED", "the original's record reads released", ref)
			return
		case "held": // authoritatively not released: the release did not land
			w.appendRelease("PROPOSED", M{"reconciliation": []M{{"query": "lookup", "found": true}},
				"evidence": []any{"the original's record still reads active: the release did not land"}})
			continue
		}
		w.finish("CANCELLED_EFFECT_UNKNOWN", "the release's outcome is unknown: the original's record could not be read", "operator")
		return
	}
	w.released("REJECTED", "the release never landed within the attempt ceiling", ref)
}

// releaseAuthorized asks for an approval of the release's own (action release) when there is none; false when
// the run has finished (denied: the hold remains).
func (w *worker) releaseAuthorized() bool {
	if w.releaseUnchecked {
		return true
	}
	answer := w.authorityFor(w.relHash, "release")
	for i := 0; i < 200 && answer["live"] != true && fmt.Sprint(answer["reason"]) != "denied by policy"; i++ {
		w.call("POST", "/authority/request", M{"proposal_hash": w.relHash, "action": "release"}, "")
		time.Sleep(10 * time.Millisecond)
		answer = w.authorityFor(w.relHash, "release")
	}
	if answer["live"] == true {
		return true
	}
	w.finish("CANCELLED_EFFECT_REMAINS", fmt.Sprintf("cancelled after the hold was confirmed; no authority to release it (%v): it remains",
		answer["reason"]), "operator")
	return false
}

// verifyRelease reads the original's record by its key: released, held, or unknown (every read failed).
func (w *worker) verifyRelease() string {
	for i := 0; i < 50; i++ {
		status, data, _, err := w.call("GET", "/reservation/lookup?key="+url.QueryEscape(w.key), nil, "")
		if record, ok := data["record"].(M); err == nil && status == 200 && data["found"] == true && data["in_flight"] != true && ok {
			if record["status"] == "released" {
				return "released"
			}
			return "held"
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "unknown"
}

// released settles the release: the compensation entry, then the original (COMPENSATED, or back to CONFIRMED
// when the release certainly failed), then the run's disposition.
func (w *worker) released(knowledge, why string, ref any) {
	w.appendRelease(knowledge, M{"evidence": []any{why}})
	if knowledge == "CONFIRMED" {
		w.append("COMPENSATED", M{"remote_ref": ref, "evidence": []any{"released by " + w.relKey}})
		w.finish("CANCELLED_NO_EFFECT", "cancelled; the hold was released and the release verified", nil)
		return
	}
	w.append("CONFIRMED", M{"remote_ref": ref, "evidence": []any{"the release " + w.relKey + " failed: " + why}})
	w.finish("CANCELLED_EFFECT_REMAINS", "cancelled; the hold remains ("+why+")", "operator")
}

func main() {
	client := flag.String("client", "careful", "default: http.DefaultClient as it comes; careful: a connection per request")
	mistake := flag.String("mistake", "", "reads_old_schema: after a deployment, read the old checkpoint as this version's own; "+
		"release_without_authority: release a cancelled confirmed hold without an approval of the release's own")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: worker [-client=default|careful] URL DB")
		os.Exit(2)
	}
	db, err := sql.Open("sqlite3", flag.Arg(1)+"?_busy_timeout=10000")
	if err != nil {
		fmt.Fprintln(os.Stderr, "store:", err)
		os.Exit(4)
	}
	w := &worker{db: db, base: flag.Arg(0), name: os.Getenv("CRASHLAB_WORKER"), run: os.Getenv("CRASHLAB_RUN")}
	w.epoch, _ = strconv.Atoi(os.Getenv("CRASHLAB_EPOCH"))
	w.versions = versionsFromEnv()
	w.contract = w.contractFrom(w.versions)
	switch *mistake {
	case "":
	case "reads_old_schema":
		w.readsOldSchema = true
	case "release_without_authority":
		w.releaseUnchecked = true
	default:
		fmt.Fprintln(os.Stderr, "-mistake is reads_old_schema, release_without_authority or nothing")
		os.Exit(2)
	}
	switch *client {
	case "default":
		w.client = http.DefaultClient
	case "careful":
		w.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	default:
		fmt.Fprintln(os.Stderr, "-client is default or careful")
		os.Exit(2)
	}
	os.Exit(w.main())
}
