PRAGMA user_version = 8;
BEGIN TRANSACTION;
CREATE TABLE cancel_requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL, run_id TEXT,
        lease_key TEXT, created_at REAL NOT NULL);
CREATE TABLE conversation_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT, workspace_id TEXT, subject TEXT,
        session_id TEXT, agent_id TEXT, role TEXT, content TEXT, tokens INTEGER,
        created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, run_id TEXT, metadata TEXT, tool_call_id TEXT, tool_calls TEXT, name TEXT, is_error INTEGER NOT NULL DEFAULT 0, principal TEXT, user_id TEXT, attempt INTEGER NOT NULL DEFAULT 1);
INSERT INTO "conversation_history" VALUES(1,NULL,NULL,'s1','agent','assistant','',NULL,1.7961659974634306431e+09,'done','{"run_id": "done", "status": "completed"}',NULL,'[{"id": "c0", "name": "step", "arguments": {"i": 0}}]',NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(2,NULL,NULL,'s1','agent','tool','ok-0',NULL,1.7961659974634306431e+09,'done','{"own": 1}','c0',NULL,'step',0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(3,NULL,NULL,'s1','agent','assistant','',NULL,1.79616599746962451933e+09,'done','{"run_id": "done", "status": "completed"}',NULL,'[{"id": "c1", "name": "step", "arguments": {"i": 1}}]',NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(4,NULL,NULL,'s1','agent','tool','ok-1',NULL,1.79616599746962451933e+09,'done','{"run_id": "done", "status": "completed"}','c1',NULL,'step',0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(5,NULL,NULL,'s1','agent','user','first try',NULL,1.79616599747108864788e+09,'retried','{"attempt": 1, "status": "interrupted"}',NULL,NULL,NULL,0,'alice','u',1);
INSERT INTO "conversation_history" VALUES(6,NULL,NULL,'s1','agent','user','second try',NULL,1.79616599747826433185e+09,'retried','{"run_id": "retried", "status": "failed"}',NULL,NULL,NULL,0,'alice','u',2);
INSERT INTO "conversation_history" VALUES(7,NULL,NULL,'s2','agent','user','once',NULL,1.79616599747867274287e+09,'again','{"run_id": "again", "status": "incomplete"}',NULL,NULL,NULL,0,NULL,NULL,1);
INSERT INTO "conversation_history" VALUES(8,NULL,NULL,'s2','agent','user','twice',NULL,1.79616599747895646092e+09,'again',NULL,NULL,NULL,NULL,0,NULL,NULL,2);
INSERT INTO "conversation_history" VALUES(9,NULL,NULL,'s2','other','user','still going',NULL,1.79616599747915792464e+09,'running',NULL,NULL,NULL,NULL,0,NULL,NULL,1);
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
INSERT INTO "proofs" VALUES('done','3e2be02a026968f6e2890f5f5d761a9e83b1af26b4e562b63aaf72d1aa91c6f3','{"agent_id":null,"assertions":[],"incomplete_reason":null,"receipts":[{"arguments":"{\"i\":0}","at":10.0,"call_id":"c0","is_error":false,"result":"ok-0","tool":"step"},{"arguments":"{\"i\":1}","at":11.0,"call_id":"c1","is_error":false,"result":"ok-1","tool":"step"}],"run_id":"done","session_id":null,"status":"completed","verification":null}',2,1.79616599747077703473e+09);
CREATE TABLE run_events (
        run_id TEXT NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
        principal TEXT, created_at REAL NOT NULL, PRIMARY KEY (run_id, id)) WITHOUT ROWID;
CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, session_id TEXT NOT NULL,
        user_id TEXT, principal TEXT, status TEXT NOT NULL, verification TEXT,
        incomplete_reason TEXT, metadata TEXT, started_at REAL NOT NULL, finished_at REAL, attempt INTEGER NOT NULL DEFAULT 1, lease_key TEXT);
INSERT INTO "runs" VALUES('done','agent','s1','u','alice','completed',NULL,NULL,'{"run_id": "done", "status": "completed"}',1.0,1.79616599747000169756e+09,1,NULL);
INSERT INTO "runs" VALUES('retried','agent','s1','u','alice','failed',NULL,NULL,'{"run_id": "retried", "status": "failed"}',2.0,1.79616599747845816616e+09,2,NULL);
INSERT INTO "runs" VALUES('again','agent','s2',NULL,NULL,'running',NULL,NULL,NULL,4.0,NULL,2,NULL);
INSERT INTO "runs" VALUES('running','other','s2',NULL,NULL,'running',NULL,NULL,NULL,6.0,NULL,1,NULL);
CREATE TABLE superseded_proofs (
        run_id TEXT NOT NULL, sha256 TEXT NOT NULL, body TEXT NOT NULL,
        receipts INTEGER NOT NULL, created_at REAL NOT NULL, superseded_at REAL NOT NULL);
CREATE TABLE tool_approvals (
        run_id TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,
        agent_id TEXT NOT NULL, session_id TEXT NOT NULL, principal TEXT, user_id TEXT,
        request TEXT NOT NULL, reasons TEXT NOT NULL, requested_at REAL NOT NULL,
        approved INTEGER, approver TEXT, decided_by TEXT, note TEXT, decided_at REAL,
        PRIMARY KEY (run_id, call_id));
CREATE TABLE tool_records (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, call_id TEXT NOT NULL,
        name TEXT NOT NULL, arguments TEXT NOT NULL, content TEXT NOT NULL,
        is_error INTEGER NOT NULL, created_at REAL NOT NULL, UNIQUE (run_id, call_id));
INSERT INTO "tool_records" VALUES(1,'done','c0','step','{"i": 0}','ok-0',0,10.0);
INSERT INTO "tool_records" VALUES(2,'done','c1','step','{"i": 1}','ok-1',0,11.0);
CREATE TABLE workflow_checkpoints (
        agent_id TEXT, run_id TEXT, step_id TEXT, state TEXT, status TEXT,
        updated_at TIMESTAMP, evidence TEXT, identity TEXT, PRIMARY KEY (run_id, step_id));
CREATE INDEX history_by_conversation ON conversation_history (session_id, agent_id, id);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX history_by_owner ON conversation_history (session_id, agent_id, principal, user_id, id);
CREATE INDEX lease_waiters_in_order ON lease_waiters (key, ticket);
CREATE INDEX cancel_requests_by_age ON cancel_requests (created_at);
CREATE INDEX counters_by_age ON counters (updated_at);
CREATE INDEX history_by_attempt ON conversation_history (run_id, attempt);
CREATE INDEX run_events_by_age ON run_events (created_at);
CREATE INDEX tool_approvals_pending ON tool_approvals (approved);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('conversation_history',9);
INSERT INTO "sqlite_sequence" VALUES('tool_records',2);
COMMIT;
