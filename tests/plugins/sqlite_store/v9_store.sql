PRAGMA user_version = 9;
BEGIN TRANSACTION;
CREATE TABLE attempt_endings (
    run_id TEXT NOT NULL, attempt INTEGER NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (run_id, attempt)) WITHOUT ROWID;
CREATE TABLE cancel_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL, run_id TEXT,
        lease_key TEXT, created_at REAL NOT NULL);
CREATE TABLE "conversation_history" (
        id INTEGER PRIMARY KEY, workspace_id TEXT, subject TEXT,
        session_id TEXT, agent_id TEXT, role TEXT, content TEXT, tokens INTEGER,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, run_id TEXT, metadata TEXT, tool_call_id TEXT, tool_calls TEXT, name TEXT, is_error INTEGER NOT NULL DEFAULT 0, principal TEXT, user_id TEXT, attempt INTEGER NOT NULL DEFAULT 1);
INSERT INTO "conversation_history" VALUES(1,NULL,NULL,'s1','agent','user','go',NULL,1.79618847315367865559e+09,'done',NULL,NULL,NULL,NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(2,NULL,NULL,'s1','agent','assistant','',NULL,1.79618847315367865559e+09,'done',NULL,NULL,'[{"id": "c0", "name": "step", "arguments": {"i": 0}}]',NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(3,NULL,NULL,'s1','agent','tool','ok-0

[soulacy] warning',NULL,1.79618847315367865559e+09,'done',NULL,'c0',NULL,'step',0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(4,NULL,NULL,'s1','agent','assistant','',NULL,1.7961884731540718079e+09,'done',NULL,NULL,'[{"id": "c1", "name": "step", "arguments": {"i": 1}}]',NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(5,NULL,NULL,'s1','agent','tool','ok-1',NULL,1.7961884731540718079e+09,'done',NULL,'c1',NULL,'step',0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(6,NULL,NULL,'s1','agent','assistant','done',NULL,1.79618847315423893927e+09,'done',NULL,NULL,NULL,NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(7,NULL,NULL,'s1','agent','user','go',NULL,1.79618847315513682372e+09,'crashed',NULL,NULL,NULL,NULL,0,'bob','u',1);
INSERT INTO "conversation_history" VALUES(8,NULL,NULL,'s1','agent','assistant','',NULL,1.79618847315513682372e+09,'crashed',NULL,NULL,'[{"id": "c0", "name": "step", "arguments": {"i": 0}}]',NULL,0,'bob','u',1);
INSERT INTO "conversation_history" VALUES(9,NULL,NULL,'s1','agent','tool','bob-0',NULL,1.79618847315513682372e+09,'crashed',NULL,'c0',NULL,'step',0,'bob','u',1);
INSERT INTO "conversation_history" VALUES(10,NULL,NULL,'s2','agent','assistant','',NULL,1.7961884731554319858e+09,'other',NULL,NULL,'[{"id": "c0", "name": "step", "arguments": {"i": 0}}]',NULL,0,'bob',NULL,1);
INSERT INTO "conversation_history" VALUES(11,NULL,NULL,'s2','agent','tool','other-0',NULL,1.7961884731554319858e+09,'other',NULL,'c0',NULL,'step',0,'bob',NULL,1);
CREATE TABLE counters (
        key TEXT PRIMARY KEY, total REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE lease_waiters (
        ticket INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, owner_id TEXT NOT NULL,
        holder TEXT NOT NULL, expires_at REAL NOT NULL, UNIQUE (key, owner_id, holder));
CREATE TABLE leases (
        key TEXT PRIMARY KEY, token INTEGER NOT NULL, owner_id TEXT, pid INTEGER, host TEXT,
        boot TEXT, holder TEXT NOT NULL DEFAULT '', acquired_at REAL, renewed_at REAL,
        expires_at REAL);
CREATE TABLE plugin_state (
        key TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE proofs (
        run_id TEXT PRIMARY KEY, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at REAL NOT NULL);
INSERT INTO "proofs" VALUES('done','cf9c3e2416464e8bd63b2817e9a09c58179cd56da61fccf2c70020d34ca74df9','{"agent_id":null,"assertions":[],"incomplete_reason":null,"receipts":[{"arguments":"{\"i\":0}","at":10.0,"call_id":"c0","is_error":false,"result":"ok-0","tool":"step"},{"arguments":"{\"call_id\":\"c1\"}","at":11.0,"call_id":"approval:c1","is_error":false,"result":"{}","tool":"approval"},{"arguments":"{\"i\":1}","at":12.0,"call_id":"c1","is_error":false,"result":"ok-1","tool":"step"}],"run_id":"done","session_id":null,"status":"completed","verification":null}',3,1.7961884731548540592e+09);
CREATE TABLE run_events (
        run_id TEXT NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
        principal TEXT, created_at REAL NOT NULL, PRIMARY KEY (run_id, id)) WITHOUT ROWID;
CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        user_id TEXT, principal TEXT, status TEXT NOT NULL, verification TEXT,
        incomplete_reason TEXT, metadata TEXT, started_at REAL NOT NULL, finished_at REAL, attempt INTEGER NOT NULL DEFAULT 1, lease_key TEXT);
INSERT INTO "runs" VALUES('done','agent','s1','u','alice','completed',NULL,NULL,'{"run_id": "done", "status": "completed"}',1.0,1.79618847315436577791e+09,1,NULL);
INSERT INTO "runs" VALUES('crashed','agent','s1','u','bob','running',NULL,NULL,NULL,2.0,NULL,1,NULL);
INSERT INTO "runs" VALUES('other','agent','s2',NULL,'bob','running',NULL,NULL,NULL,3.0,NULL,1,NULL);
CREATE TABLE superseded_proofs (
        run_id TEXT NOT NULL, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at REAL NOT NULL, superseded_at REAL NOT NULL);
CREATE TABLE tool_approvals (
        run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, principal TEXT, user_id TEXT,
        request TEXT NOT NULL, reasons TEXT NOT NULL, requested_at REAL NOT NULL,
        approved INTEGER, approver TEXT, decided_by TEXT, note TEXT, decided_at REAL,
        PRIMARY KEY (run_id, call_id));
CREATE TABLE "tool_records" (
        seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL, call_id TEXT NOT NULL,
        name TEXT NOT NULL, arguments TEXT NOT NULL, content TEXT NOT NULL,
        is_error INTEGER NOT NULL, created_at REAL NOT NULL, UNIQUE (run_id, call_id));
INSERT INTO "tool_records" VALUES(1,'done','c0','step','{"i": 0}','ok-0',0,10.0);
INSERT INTO "tool_records" VALUES(2,'done','approval:c1','approval','{"call_id": "c1"}','{}',0,11.0);
INSERT INTO "tool_records" VALUES(3,'done','c1','step','{"i": 1}','ok-1',0,12.0);
INSERT INTO "tool_records" VALUES(4,'crashed','c0','step','{"i": 0}','bob-0',0,20.0);
INSERT INTO "tool_records" VALUES(5,'other','c0','step','{"i": 0}','other-0',1,30.0);
CREATE TABLE workflow_checkpoints (
        agent_id TEXT, run_id TEXT, step_id TEXT, state TEXT, status TEXT,
        updated_at TIMESTAMP, evidence TEXT, identity TEXT, PRIMARY KEY (run_id, step_id));
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX lease_waiters_in_order ON lease_waiters (key, ticket);
CREATE INDEX cancel_requests_by_age ON cancel_requests (created_at);
CREATE INDEX counters_by_age ON counters (updated_at);
CREATE INDEX run_events_by_age ON run_events (created_at);
CREATE INDEX tool_approvals_pending ON tool_approvals (approved);
CREATE INDEX history_by_owner ON conversation_history (session_id, agent_id, principal, user_id, id);
DELETE FROM "sqlite_sequence";
COMMIT;
