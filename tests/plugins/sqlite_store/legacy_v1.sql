-- The schema of the original system (user_version 0), with rows written by it.
CREATE TABLE conversation_history (
    id INTEGER PRIMARY KEY AUTOINCREMENT, workspace_id TEXT, subject TEXT,
    session_id TEXT, agent_id TEXT, role TEXT, content TEXT, tokens INTEGER,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE workflow_checkpoints (
    agent_id TEXT, run_id TEXT, step_id TEXT, state TEXT, status TEXT,
    updated_at TIMESTAMP, PRIMARY KEY (run_id, step_id));
INSERT INTO conversation_history (workspace_id, subject, session_id, agent_id, role, content,
    tokens, created_at) VALUES
    ('ws', 'alice', 'old-session', 'helper', 'user', 'What is the capital of Norway?', 8,
     '2026-03-01 10:00:00'),
    ('ws', 'alice', 'old-session', 'helper', 'assistant', 'Oslo — ünïcødé intact.', 6,
     '2026-03-01 10:00:02');
INSERT INTO workflow_checkpoints VALUES
    ('helper', 'old-run', 'fetch', '{"x": 1}', 'completed', '2026-03-01 10:00:01');
