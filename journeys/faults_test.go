//go:build linux

package journeys

// Storage faults and model faults against the real binary (issue 7).
//
// Storage: the disk fills up (a small tmpfs as the daemon's home, filled
// with a ballast file), another process holds the write lock past
// busy_timeout, state.db and its WAL turn read-only under the running
// daemon (the immutable inode flag, which binds root too, also through
// descriptors opened earlier), and the daemon starts on a read-only
// state.db. In every case nothing is acknowledged that was not committed,
// the client hears storage_unavailable, and once the fault clears the same
// daemon process works again.
//
// Model: connection refused, a stream that stalls past model.idle_timeout,
// and garbage bytes in the stream each fail the turn with an error that
// names the cause; the daemon lives and the next input of the session
// completes. (HTTP statuses, HTML bodies and cut streams are covered by
// TestModelFailures and TestAttackModelRetryDuplicatesInput.)
//
// Helpers are prefixed "ft".

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/jmoiron/sqlx"

	"github.com/sessiond/sessiond/fixtures"
)

// ---------------------------------------------------------------------------
// Helpers

// ftMountTmpfs mounts a tmpfs of sizeKiB under a fresh temporary directory
// and returns that directory, to be used as a daemon home. It is unmounted
// at cleanup (after the daemon and the store handles registered later are
// gone). The test is skipped when mounting is not permitted.
func ftMountTmpfs(t *testing.T, sizeKiB int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("size=%dk,mode=0700", sizeKiB)
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		t.Skipf("cannot mount a tmpfs to fill up (needs root or CAP_SYS_ADMIN; euid %d): %v", os.Geteuid(), err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			// Something still holds a file open: detach lazily so that the
			// temporary directory can go.
			if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmounting the tmpfs at %s: %v", dir, err)
			}
		}
	})
	return dir
}

// ftFill writes DIR/ballast until the file system is full, then frees
// `leave` bytes (a multiple of the 4 KiB page) again, and returns the
// ballast's path. Removing the ballast clears the fault.
func ftFill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "ballast")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	if leave > 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(st.Size() - leave); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// ftFileSize is the size of path, 0 when it does not exist.
func ftFileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// The immutable inode flag (chattr +i) makes a file unwritable for root
// too, and also through descriptors opened before it was set (pwrite fails
// with EPERM).
const ftImmutableFL = 0x10 // FS_IMMUTABLE_FL

// ftIoc encodes FS_IOC_GETFLAGS (dir 2, nr 1) and FS_IOC_SETFLAGS (dir 1,
// nr 2): _IOR/_IOW('f', nr, long) in the generic Linux encoding.
func ftIoc(dir, nr uintptr) uintptr { return dir<<30 | unsafe.Sizeof(uintptr(0))<<16 | 'f'<<8 | nr }

// ftSetImmutable sets or clears the immutable flag of path.
func ftSetImmutable(path string, on bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ftIoc(2, 1), uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("FS_IOC_GETFLAGS %s: %w", path, e)
	}
	if on {
		flags |= ftImmutableFL
	} else {
		flags &^= ftImmutableFL
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ftIoc(1, 2), uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("FS_IOC_SETFLAGS %s: %w", path, e)
	}
	return nil
}

// ftImmutable makes the files read-only (immutable) and clears the flag at
// cleanup whatever happens: an immutable file cannot be deleted, so the
// temporary directory could not be removed. The test is skipped when the
// file system of the temporary directory does not support the flag.
func ftImmutable(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := ftSetImmutable(p, true); err != nil {
			t.Skipf("cannot set the immutable flag on %s (file system without FS_IOC_SETFLAGS, or no CAP_LINUX_IMMUTABLE): %v", p, err)
		}
		t.Cleanup(func() {
			if err := ftSetImmutable(p, false); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("clearing the immutable flag of %s: %v", p, err)
			}
		})
	}
}

// ftWritable clears the immutable flag of the files (the fault clears).
func ftWritable(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := ftSetImmutable(p, false); err != nil {
			t.Fatal(err)
		}
	}
}

// ftState counts what the store holds, to show a refused write left
// nothing behind.
type ftState struct {
	Sessions   int   `db:"sessions"`
	Admissions int   `db:"admissions"`
	Messages   int   `db:"messages"`
	Events     int   `db:"events"`
	LastSeq    int64 `db:"last_seq"` // sessions.last_event_seq of the session
	NextSeq    int64 `db:"next_seq"` // sessions.next_admission_seq of the session
}

func ftSnapshot(t *testing.T, db *sqlx.DB, sessionID string) ftState {
	t.Helper()
	var s ftState
	if err := db.Get(&s, `SELECT (SELECT count(*) FROM sessions) AS sessions,
		(SELECT count(*) FROM session_admissions) AS admissions,
		(SELECT count(*) FROM messages) AS messages,
		(SELECT count(*) FROM events) AS events,
		(SELECT last_event_seq FROM sessions WHERE session_id = ?1) AS last_seq,
		(SELECT next_admission_seq FROM sessions WHERE session_id = ?1) AS next_seq`, sessionID); err != nil {
		t.Fatalf("reading the store: %v", err)
	}
	return s
}

// ftSubmit is prompt.submit returning the error.
func ftSubmit(t *testing.T, c *fixtures.Client, sessionID, inputID, text string) (receipt, error) {
	t.Helper()
	var r receipt
	err := c.Call(ctxT(t), "prompt.submit", map[string]any{"session_id": sessionID, "input_id": inputID, "text": text}, &r)
	return r, err
}

// ftWantUnavailable asserts err is the storage_unavailable refusal and
// returns its message.
func ftWantUnavailable(t *testing.T, err error, what string) string {
	t.Helper()
	var re *fixtures.RPCError
	if !errors.As(err, &re) || re.Code != -32000 || re.Reason() != "storage_unavailable" {
		t.Fatalf("%s: err = %v, want -32000/storage_unavailable", what, err)
	}
	return re.Message
}

// ftNoTrace asserts that a refused input left nothing: no admission row,
// the store unchanged, and no event about it published to the client.
func ftNoTrace(t *testing.T, db *sqlx.DB, c *fixtures.Client, sessionID, inputID string, before ftState) {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM session_admissions WHERE request_id = ?`, inputID); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("the refused input %s has %d admission rows", inputID, n)
	}
	if after := ftSnapshot(t, db, sessionID); after != before {
		t.Fatalf("the store changed although every write was refused: before %+v, after %+v", before, after)
	}
	for _, e := range c.Events() {
		if e.SessionID == sessionID && e.Seq != nil && *e.Seq > before.LastSeq {
			t.Fatalf("event %s #%d published although nothing was committed", e.Type, *e.Seq)
		}
	}
}

// ftComplete submits text and asserts its turn completes.
func ftComplete(t *testing.T, c *fixtures.Client, sessionID, inputID, text string) receipt {
	t.Helper()
	r := submit(t, c, sessionID, inputID, text)
	if out, e := trTurnEnd(t, c, r.AdmissionID); out != "completed" {
		t.Fatalf("turn of %s: %s (%s), want completed", inputID, out, e)
	}
	return r
}

// ftConsecutive asserts the durable events the client received for the
// session have consecutive seqs: a refused transaction left no hole.
func ftConsecutive(t *testing.T, c *fixtures.Client, sessionID string) {
	t.Helper()
	var prev int64 = -1
	for _, e := range durableEvents(c.Events(), sessionID) {
		if prev >= 0 && *e.Seq != prev+1 {
			t.Fatalf("event seqs jump from %d to %d: %s", prev, *e.Seq, describeEvents(c.Events()))
		}
		prev = *e.Seq
	}
}

// ftAfterFault is what every storage fault must allow once it cleared, in
// the same daemon process: the refused input, sent again with the same
// input_id, is admitted as new (not a duplicate) with the seq it would
// have had, its turn completes, the model got it exactly once, and
// session.create and session.resume work.
func ftAfterFault(t *testing.T, d *fixtures.Daemon, pid int, c *fixtures.Client, m *fixtures.FakeModel,
	sessionID, inputID, text string, before ftState) {
	t.Helper()
	r := ftComplete(t, c, sessionID, inputID, text)
	if r.Duplicate || r.Seq != before.NextSeq {
		t.Fatalf("receipt after the fault = %+v, want a new admission with seq %d", r, before.NextSeq)
	}
	if n := len(m.RequestsWithLastUser(text)); n != 1 {
		t.Fatalf("the model got the input %d times, want 1", n)
	}
	ftConsecutive(t, c, sessionID)
	s2 := createSession(t, c, map[string]any{})
	if got := resume(t, c, s2.SessionID); got.SessionID != s2.SessionID {
		t.Fatalf("resume of the new session = %+v", got)
	}
	if !d.Running() || d.PID() != pid {
		t.Fatalf("the daemon was restarted or died (pid %d, was %d)", d.PID(), pid)
	}
}

type ftStoredMessage struct {
	Role    string `db:"role"`
	Content string `db:"content"`
	Kind    string `db:"kind"`
}

// ftMessagesOf returns the transcript rows of one admission.
func ftMessagesOf(t *testing.T, db *sqlx.DB, admissionID string) []ftStoredMessage {
	t.Helper()
	var ms []ftStoredMessage
	if err := db.Select(&ms, `SELECT role, content, COALESCE(kind, '') AS kind FROM messages WHERE admission_id = ? ORDER BY id`, admissionID); err != nil {
		t.Fatal(err)
	}
	return ms
}

func ftRoles(ms []ftStoredMessage) string {
	var roles []string
	for _, m := range ms {
		roles = append(roles, m.Role)
	}
	return strings.Join(roles, ",")
}

// ftAdmission reads one admission row with its error text.
func ftAdmission(t *testing.T, db *sqlx.DB, admissionID string) (status, outcome, errText string) {
	t.Helper()
	var row struct {
		Status  string         `db:"status"`
		Outcome sql.NullString `db:"outcome"`
		Error   sql.NullString `db:"error"`
	}
	if err := db.Get(&row, `SELECT status, outcome, error FROM session_admissions WHERE admission_id = ?`, admissionID); err != nil {
		t.Fatal(err)
	}
	return row.Status, row.Outcome.String, row.Error.String
}

// ftStartConfig is the config of the storage-fault daemons.
func ftStartConfig(m *fixtures.FakeModel) string { return fixtures.FakeModelConfig(m, "") }

// ---------------------------------------------------------------------------
// Disk full

// TestFaultDiskFull: the daemon's home is a small tmpfs filled up by a
// ballast file. prompt.submit and session.create are refused with
// storage_unavailable and leave nothing in the store; reads go on. Once the
// ballast is removed, the same input_id is admitted as new and runs once.
func TestFaultDiskFull(t *testing.T) {
	t.Parallel()
	home := ftMountTmpfs(t, 16<<10)
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: home, Config: ftStartConfig(m)})
	pid := d.PID()
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	ftComplete(t, c, s.SessionID, "before", "hello before the disk fills")
	db := fixtures.OpenStoreReadOnly(t, home)
	before := ftSnapshot(t, db, s.SessionID)

	ballast := ftFill(t, home, 0)
	const text = "this input arrives while the disk is full"
	_, err := ftSubmit(t, c, s.SessionID, "while-full", text)
	if msg := ftWantUnavailable(t, err, "prompt.submit on a full disk"); !strings.Contains(msg, "full") {
		t.Errorf("the refusal %q does not say the disk is full", msg)
	}
	// The retry of a refused input is refused the same way, never as a
	// duplicate of something half-written.
	_, err = ftSubmit(t, c, s.SessionID, "while-full", text)
	ftWantUnavailable(t, err, "prompt.submit again on a full disk")
	err = c.Call(ctxT(t), "session.create", map[string]any{"cwd": t.TempDir()}, nil)
	ftWantUnavailable(t, err, "session.create on a full disk")
	// Reads need no space.
	if snap := resume(t, c, s.SessionID); len(snap.Pending) != 0 || snap.LastSeq != before.LastSeq {
		t.Fatalf("snapshot on a full disk: pending %v, last_seq %d (want %d)", snap.Pending, snap.LastSeq, before.LastSeq)
	}
	ftNoTrace(t, db, c, s.SessionID, "while-full", before)
	if n := len(m.RequestsWithLastUser(text)); n != 0 {
		t.Fatalf("a refused input reached the model %d times", n)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	ftAfterFault(t, d, pid, c, m, s.SessionID, "while-full", text, before)
}

// TestFaultDiskFullMidTurn: the disk fills while the model is streaming, so
// the turn's own writes fail.
//
// What the daemon does when the reply asks for a tool call: that assistant
// message cannot be persisted, so the turn fails ("persist assistant
// message: storage unavailable: … full"; the call never runs) and its settle
// is retried in the background; once space is back it settles
// terminal/failed with that error and a boundary note, the reply that could
// not be stored is not in the transcript, the input reached the model
// exactly once and is never sent again as new input, and the next input of
// the session runs — without a restart.
//
// When the reply is the final answer, it is written by the settle itself,
// which is retried with the answer: once space is back the turn completes
// with its answer stored, and the next request carries it.
//
// If the daemon dies while the store is still failing, the admission is left
// started, becomes unknown at the next boot (never re-run) and waits for
// prompt.resolve_unknown like any turn lost in a crash.
func TestFaultDiskFullMidTurn(t *testing.T) {
	t.Parallel()
	home := ftMountTmpfs(t, 16<<10)
	wal := filepath.Join(home, "state.db-wal")
	m := fixtures.NewFakeModel(t)
	// Long replies: persisting one needs many more pages than the two left
	// free below.
	long := strings.Repeat("lorem ipsum dolor ", 1500)
	answer := "an answer kept until the disk has room: " + long
	const question = "please run something long"
	gate := fixtures.NewGate()
	t.Cleanup(gate.Release)
	m.On(question, fixtures.Reply{StreamGate: gate, ToolCalls: []fixtures.FakeToolCall{
		{Name: "terminal", Arguments: jsonArgs(map[string]string{"command": "echo " + long})}}})
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Home: home, Config: ftStartConfig(m)})
	pid := d.PID()
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	db := fixtures.OpenStoreReadOnly(t, home)

	// midTurnFault holds a turn mid-stream, fills the disk (two pages left,
	// so the failing commit shows as WAL growth), lets the stream finish and
	// waits until the daemon tried to persist the answer.
	midTurnFault := func(gate *fixtures.Gate, what string) (ballast string) {
		t.Helper()
		waitParked(t, gate, what)
		ballast = ftFill(t, home, 8<<10)
		walBefore := ftFileSize(t, wal)
		gate.Release()
		fixtures.Eventually(t, wait, "the daemon's attempt to persist the answer of "+what, func() bool {
			return ftFileSize(t, wal) > walBefore
		})
		return ballast
	}

	r := submit(t, c, s.SessionID, "q1", question)
	ballast := midTurnFault(gate, "the first turn")
	// While the disk is full nothing of the reply is stored and the turn
	// stays started.
	if st, _, _ := ftAdmission(t, db, r.AdmissionID); st != "started" {
		t.Fatalf("admission is %s while its writes fail, want started", st)
	}
	if roles := ftRoles(ftMessagesOf(t, db, r.AdmissionID)); roles != "user" {
		t.Fatalf("transcript of the failing turn: %s, want only the user message", roles)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	out, errText := trTurnEnd(t, c, r.AdmissionID)
	if out != "failed" {
		t.Fatalf("outcome %s (%s), want failed", out, errText)
	}
	for _, want := range []string{"persist assistant message", "storage unavailable", "full"} {
		if !strings.Contains(errText, want) {
			t.Errorf("error %q lacks %q", errText, want)
		}
	}
	if st, oc, e := ftAdmission(t, db, r.AdmissionID); st != "terminal" || oc != "failed" || e != errText {
		t.Fatalf("stored admission %s/%s (%q), want terminal/failed with %q", st, oc, e, errText)
	}
	ms := ftMessagesOf(t, db, r.AdmissionID)
	if ftRoles(ms) != "user,boundary" || !strings.Contains(ms[1].Content, "turn failed") {
		t.Fatalf("transcript of the failed turn: %+v, want the user message and a boundary", ms)
	}
	if n := len(m.RequestsWithLastUser(question)); n != 1 {
		t.Fatalf("the model got the input %d times, want 1", n)
	}
	ftComplete(t, c, s.SessionID, "q2", "the disk has room again")
	reqs := m.RequestsWithLastUser("the disk has room again")
	last := reqs[len(reqs)-1]
	if !slices.Equal(last.UserTexts, []string{question, "the disk has room again"}) {
		t.Fatalf("user texts of the next request: %q", last.UserTexts)
	}
	if strings.Contains(string(last.Raw), "lorem ipsum") {
		t.Fatal("the reply that was never stored reached the next request")
	}
	if !d.Running() || d.PID() != pid {
		t.Fatal("the daemon restarted or died")
	}

	// The final answer while the disk is full: the settle that writes it is
	// retried, with it, until there is room; the turn completes.
	// longAnswerFault scripts question to be answered at length, submits
	// it and fills the disk while the answer streams.
	longAnswerFault := func(inputID, question, what string) (receipt, string) {
		t.Helper()
		gate := fixtures.NewGate()
		t.Cleanup(gate.Release)
		m.On(question, fixtures.Reply{Text: answer, StreamGate: gate})
		r := submit(t, c, s.SessionID, inputID, question)
		return r, midTurnFault(gate, what)
	}
	r1, ballast := longAnswerFault("q-answer", "please answer at length", "the answer")
	if st, _, _ := ftAdmission(t, db, r1.AdmissionID); st != "started" {
		t.Fatalf("admission is %s while its settle fails, want started", st)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if out, errText := trTurnEnd(t, c, r1.AdmissionID); out != "completed" {
		t.Fatalf("the answered turn: %s (%s), want completed once the disk has room", out, errText)
	}
	if ms := ftMessagesOf(t, db, r1.AdmissionID); ftRoles(ms) != "user,assistant" || ms[1].Content != answer {
		t.Fatalf("transcript of the answered turn: %s, want the user message and the whole answer", ftRoles(ms))
	}
	ftComplete(t, c, s.SessionID, "q-after-answer", "thanks")
	reqs = m.RequestsWithLastUser("thanks")
	if !strings.Contains(string(reqs[len(reqs)-1].Raw), "an answer kept until the disk has room") {
		t.Fatal("the next request lacks the answer stored after the fault")
	}

	// The daemon dies while the store still fails: at the next boot the
	// turn is unknown, never re-run.
	const question2 = "and another long answer"
	r2, ballast := longAnswerFault("q3", question2, "the second turn")
	d.SIGKILL(t)
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	d.Restart(t)
	c2 := d.Dial(t)
	snap := resume(t, c2, s.SessionID)
	if len(snap.Pending) != 1 || snap.Pending[0].AdmissionID != r2.AdmissionID || snap.Pending[0].Status != "unknown" {
		t.Fatalf("after the restart pending = %+v, want %s unknown", snap.Pending, r2.AdmissionID)
	}
	resolveUnknownAdmission(t, c2, s.SessionID, r2.AdmissionID, *snap.Pending[0].ExecutionGeneration)
	ftComplete(t, c2, s.SessionID, "q4", "after the operator decided")
	if n := len(m.RequestsWithLastUser(question2)); n != 1 {
		t.Fatalf("the model got the second input %d times, want 1", n)
	}
}

// ---------------------------------------------------------------------------
// Write lock held by another process

// ftLockEnv names the database the helper process locks.
const ftLockEnv = "SESSIOND_FAULT_LOCK_DB"

// TestHelperFaultWriteLock is not a test: TestFaultWriteLockHeld runs the
// test binary again with only this function and ftLockEnv set, as the other
// process that holds state.db's write lock (BEGIN IMMEDIATE) until its stdin
// closes.
func TestHelperFaultWriteLock(t *testing.T) {
	path := os.Getenv(ftLockEnv)
	if path == "" {
		t.Skip("helper process of TestFaultWriteLockHeld; runs only when that test starts it")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	fmt.Println("released")
}

// ftLockHolder is the running helper process.
type ftLockHolder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// ftHoldWriteLock starts the helper process on dbPath and waits until it
// holds the write lock.
func ftHoldWriteLock(t *testing.T, dbPath string) *ftLockHolder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFaultWriteLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), ftLockEnv+"="+dbPath)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &ftLockHolder{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		h.stdin.Close()
		h.cmd.Process.Kill()
		h.cmd.Wait()
	})
	h.await(t, "locked")
	return h
}

func (h *ftLockHolder) await(t *testing.T, want string) {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("lock helper (pid %d) exited before saying %q", h.cmd.Process.Pid, want)
			}
			if line == want {
				return
			}
		case <-timer.C:
			t.Fatalf("lock helper (pid %d) did not say %q within %v", h.cmd.Process.Pid, want, wait)
		}
	}
}

// release makes the helper roll back and waits for it.
func (h *ftLockHolder) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	h.await(t, "released")
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("lock helper: %v", err)
	}
}

// TestFaultWriteLockHeld: another process holds state.db's write lock
// longer than busy_timeout (storage.busy_timeout, 500 ms here).
// prompt.submit waits that long, then is refused with storage_unavailable
// and nothing is stored; reads are not blocked. Once the lock is released
// the same daemon admits the input.
func TestFaultWriteLockHeld(t *testing.T) {
	t.Parallel()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "storage: {busy_timeout: 500}")})
	pid := d.PID()
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	before := ftSnapshot(t, db, s.SessionID)

	holder := ftHoldWriteLock(t, filepath.Join(d.Home, "state.db"))
	const text = "submitted while another process holds the lock"
	start := time.Now()
	_, err := ftSubmit(t, c, s.SessionID, "locked-out", text)
	took := time.Since(start)
	msg := ftWantUnavailable(t, err, "prompt.submit while the write lock is held")
	if !strings.Contains(msg, "locked") && !strings.Contains(msg, "busy") {
		t.Errorf("the refusal %q does not say the database is locked", msg)
	}
	if took < 400*time.Millisecond {
		t.Errorf("refused after %v: the daemon did not wait for storage.busy_timeout (500 ms)", took)
	}
	t.Logf("refused after %v", took.Round(time.Millisecond))
	// WAL readers are not blocked by a writer.
	if snap := resume(t, c, s.SessionID); snap.LastSeq != before.LastSeq {
		t.Fatalf("snapshot while locked: last_seq %d, want %d", snap.LastSeq, before.LastSeq)
	}
	ftNoTrace(t, db, c, s.SessionID, "locked-out", before)

	holder.release(t)
	ftAfterFault(t, d, pid, c, m, s.SessionID, "locked-out", text, before)
}

// ---------------------------------------------------------------------------
// Read-only state.db

// TestFaultReadOnlyDatabaseAndWAL: state.db and state.db-wal become
// unwritable under the running daemon (immutable flag: even root's pwrite on
// the already open descriptors fails). Commits fail with an I/O error:
// storage_unavailable, nothing stored. Clearing the flag heals the same
// process.
func TestFaultReadOnlyDatabaseAndWAL(t *testing.T) {
	t.Parallel()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: ftStartConfig(m)})
	pid := d.PID()
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	ftComplete(t, c, s.SessionID, "before", "hello while the files are writable")
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	before := ftSnapshot(t, db, s.SessionID)
	files := []string{filepath.Join(d.Home, "state.db"), filepath.Join(d.Home, "state.db-wal")}
	ftImmutable(t, files...)

	const text = "submitted while state.db and its WAL are read-only"
	_, err := ftSubmit(t, c, s.SessionID, "read-only", text)
	if msg := ftWantUnavailable(t, err, "prompt.submit on a read-only WAL"); !strings.Contains(msg, "I/O error") {
		t.Errorf("the refusal %q does not name the I/O error", msg)
	}
	_, err = ftSubmit(t, c, s.SessionID, "read-only", text)
	ftWantUnavailable(t, err, "prompt.submit again on a read-only WAL")
	err = c.Call(ctxT(t), "session.create", map[string]any{"cwd": t.TempDir()}, nil)
	ftWantUnavailable(t, err, "session.create on a read-only WAL")
	resume(t, c, s.SessionID)
	ftNoTrace(t, db, c, s.SessionID, "read-only", before)

	ftWritable(t, files...)
	ftAfterFault(t, d, pid, c, m, s.SessionID, "read-only", text, before)
}

// TestFaultReadOnlyDatabaseFileOnly: only state.db becomes read-only, its
// WAL stays writable. In WAL mode a commit writes only the WAL, so inputs
// are admitted and their receipts are true: they are committed (and
// fsynced) in the WAL. Only checkpoints fail, so the WAL keeps growing and
// survives a graceful stop (normally it is checkpointed and removed). The
// next start on the still read-only file refuses to run, naming it; once
// the flag is cleared, everything acknowledged is there.
func TestFaultReadOnlyDatabaseFileOnly(t *testing.T) {
	t.Parallel()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: fixtures.FakeModelConfig(m, "storage: {checkpoint_interval: 1}")})
	c := d.Dial(t)
	s := createSession(t, c, map[string]any{})
	resume(t, c, s.SessionID)
	dbFile := filepath.Join(d.Home, "state.db")
	wal := dbFile + "-wal"
	ftImmutable(t, dbFile)

	const text = "submitted while only state.db is read-only"
	r := ftComplete(t, c, s.SessionID, "wal-only", text)
	if r.Duplicate || r.Status != "queued" && r.Status != "started" {
		t.Fatalf("receipt %+v", r)
	}
	// Nothing is refused, but the operator is told: the periodic
	// checkpoint fails, daemon.info says so and the log names the file.
	var info struct {
		Storage struct {
			WALBytes        int64  `json:"wal_bytes"`
			CheckpointError string `json:"checkpoint_error"`
		} `json:"storage"`
	}
	fixtures.Eventually(t, 20*time.Second, "daemon.info to report the failing checkpoint", func() bool {
		if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil {
			t.Fatalf("daemon.info: %v", err)
		}
		return info.Storage.CheckpointError != ""
	})
	if info.Storage.WALBytes == 0 || !strings.Contains(d.Stderr(), "state.db cannot be written") || !strings.Contains(d.Stderr(), dbFile) {
		t.Fatalf("daemon.info storage %+v; stderr:\n%s", info.Storage, d.Stderr())
	}
	if n := len(m.RequestsWithLastUser(text)); n != 1 {
		t.Fatalf("the model got the input %d times, want 1", n)
	}
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	if st, oc, _ := ftAdmission(t, db, r.AdmissionID); st != "terminal" || oc != "completed" {
		t.Fatalf("stored admission %s/%s, want terminal/completed", st, oc)
	}
	db.Close()
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("graceful stop with a read-only state.db exited %d", code)
	}
	if n := ftFileSize(t, wal); n == 0 {
		t.Fatal("the WAL is gone or empty after the stop: it was checkpointed into a read-only state.db?")
	}

	code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{Home: d.Home})
	if code != 1 || !strings.Contains(stderr, dbFile) || !strings.Contains(stderr, "cannot be written") {
		t.Fatalf("start on a read-only state.db: exit %d, stderr:\n%s\nwant exit 1 naming %s", code, stderr, dbFile)
	}

	ftWritable(t, dbFile)
	d.Restart(t)
	c2 := d.Dial(t)
	snap := resume(t, c2, s.SessionID)
	var replies []string
	for _, msg := range snap.Messages {
		if msg.AdmissionID == r.AdmissionID && msg.Role == "assistant" {
			replies = append(replies, msg.Content)
		}
	}
	if len(replies) != 1 || replies[0] != "ok: "+text {
		t.Fatalf("after clearing the flag, the reply committed in the WAL is %q, want [%q]", replies, "ok: "+text)
	}
	ftComplete(t, c2, s.SessionID, "after", "and the daemon writes again")
}

// TestFaultReadOnlyAtStart: a daemon started on a home whose state.db
// cannot be written exits 1 at once with an error naming the file (SQLite
// would silently open it read-only and fail the first write), writes no
// descriptor, and starts normally once the file is writable again.
func TestFaultReadOnlyAtStart(t *testing.T) {
	t.Parallel()
	m := fixtures.NewFakeModel(t)
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: ftStartConfig(m)})
	s := createSession(t, d.Dial(t), map[string]any{})
	if code := d.SIGTERM(t); code != 0 {
		t.Fatalf("stop exited %d", code)
	}
	dbFile := filepath.Join(d.Home, "state.db")
	ftImmutable(t, dbFile)

	start := time.Now()
	code, stderr := fixtures.StartDaemonExpectFailure(t, fixtures.DaemonOptions{Home: d.Home})
	if code != 1 || !strings.Contains(stderr, dbFile) || !strings.Contains(stderr, "cannot be written") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 naming %s", code, stderr, dbFile)
	}
	t.Logf("refused to start after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr))
	if _, err := os.Stat(fixtures.DescriptorPath(d.Home)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a descriptor was left by the daemon that could not start: %v", err)
	}

	ftWritable(t, dbFile)
	d.Restart(t)
	c := d.Dial(t)
	resume(t, c, s.SessionID)
	ftComplete(t, c, s.SessionID, "after", "the store is writable again")
}

// ---------------------------------------------------------------------------
// Model faults

// ftChunk is one streamed chat.completion.chunk frame.
func ftChunk(delta string) string {
	return `data: {"id":"chatcmpl-ft","object":"chat.completion.chunk","created":1,"model":"fake-model","choices":[{"index":0,"delta":` +
		delta + `,"finish_reason":null}]}` + "\n\n"
}

// ftGarbage returns n reproducible random bytes (invalid UTF-8, NULs,
// control characters, stray newlines).
func ftGarbage(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// ftReservedPort is a TCP socket bound to 127.0.0.1 that does not listen
// yet: connecting is refused (nothing listens), and the port cannot be
// taken by anybody else until serve makes it listen.
type ftReservedPort struct {
	fd   int
	Port int
}

func ftReservePort(t *testing.T) *ftReservedPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	p := &ftReservedPort{fd: fd, Port: sa.(*syscall.SockaddrInet4).Port}
	t.Cleanup(func() {
		if p.fd >= 0 {
			syscall.Close(p.fd)
		}
	})
	return p
}

// serve makes the port listen and proxy every request to target (the
// server came up).
func (p *ftReservedPort) serve(t *testing.T, target string) {
	t.Helper()
	if err := syscall.Listen(p.fd, 64); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(p.fd), "reserved-port")
	p.fd = -1
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.FlushInterval = -1 // stream
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestFaultModel: model servers that cannot be reached, stall or send
// garbage. Each turn ends failed with an error naming the cause, the input
// reached the model the expected number of times, the daemon lives, and
// the next input of the same session completes with a valid request.
func TestFaultModel(t *testing.T) {
	m := fixtures.NewFakeModel(t)
	stall := fixtures.NewGate()
	t.Cleanup(stall.Release) // never released before: the stream stalls
	start := ftChunk(`{"role":"assistant","content":""}`) + ftChunk(`{"content":"partial ans"}`)
	binary := ftGarbage(7, 4096)
	notJSON := append([]byte(start+"data: {\"choices\": [ not json \x00\xff\xfe"), append(ftGarbage(8, 64), "\n\n"...)...)
	port := ftReservePort(t)
	cases := []struct {
		name     string
		text     string
		reply    *fixtures.Reply // nil: the session's base_url is the refused port
		want     []string
		requests int // times the fake model received the input
	}{
		// Transport errors before any response are retried (twice, with
		// backoff, model/client.go); nothing ever listened.
		{"connection refused", "refused input", nil, []string{"cannot reach model server", "connection refused"}, 0},
		// Output already arrived: never retried.
		{"stall past idle timeout", "stalling input", &fixtures.Reply{Text: "I was about to say something", StreamGate: stall},
			[]string{"timed out", "idle timeout"}, 1},
		{"binary garbage", "garbage input", &fixtures.Reply{RawSSE: binary}, []string{"unusable response", "not an event stream"}, 1},
		{"garbage after a good start", "half garbage input", &fixtures.Reply{RawSSE: append([]byte(start), binary...)}, []string{"truncated"}, 1},
		{"non-JSON data frame", "not json input", &fixtures.Reply{RawSSE: notJSON}, []string{"unusable response", "not a chat completion chunk"}, 1},
	}
	for _, tc := range cases {
		if tc.reply != nil {
			m.On(tc.text, *tc.reply)
		}
	}
	const next = "and after that"
	m.On(next, fixtures.Reply{Text: "still here"})
	cfg := fmt.Sprintf("model: {provider: openai, default: %s, base_url: %q, idle_timeout: 1}\n", fixtures.FakeModelName, m.URL())
	d := fixtures.StartDaemon(t, fixtures.DaemonOptions{Config: cfg})
	pid := d.PID()
	c := d.Dial(t)
	db := fixtures.OpenStoreReadOnly(t, d.Home)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{}
			if tc.reply == nil {
				params["base_url"] = fmt.Sprintf("http://127.0.0.1:%d/v1", port.Port)
			}
			s := createSession(t, c, params)
			resume(t, c, s.SessionID)
			began := time.Now()
			r := submit(t, c, s.SessionID, fmt.Sprint("fault-", i), tc.text)
			out, errText := trTurnEnd(t, c, r.AdmissionID)
			took := time.Since(began)
			t.Logf("failed after %v: %s", took.Round(time.Millisecond), errText)
			if out != "failed" {
				t.Fatalf("outcome %s (%s), want failed", out, errText)
			}
			for _, w := range tc.want {
				if !strings.Contains(errText, w) {
					t.Errorf("error %q lacks %q", errText, w)
				}
			}
			if _, _, stored := ftAdmission(t, db, r.AdmissionID); stored != errText || !utf8.ValidString(stored) {
				t.Errorf("stored error %q, want the valid UTF-8 text %q", stored, errText)
			}
			if n := len(m.RequestsWithLastUser(tc.text)); n != tc.requests {
				t.Errorf("the model got the input %d times, want %d", n, tc.requests)
			}
			if tc.reply == nil {
				// Two retries wait about 0.5 s and 1 s (minus jitter).
				if took < time.Second {
					t.Errorf("failed after %v: the connection was not retried with backoff", took)
				}
				port.serve(t, strings.TrimSuffix(m.URL(), "/v1")) // the server comes up
			}
			if !d.Running() || d.PID() != pid {
				t.Fatal("the daemon died")
			}
			r2 := submit(t, c, s.SessionID, fmt.Sprint("next-", i), next)
			if out, e := trTurnEnd(t, c, r2.AdmissionID); out != "completed" {
				t.Fatalf("next turn: %s (%s)", out, e)
			}
			reqs := m.RequestsWithLastUser(next)
			last := reqs[len(reqs)-1]
			var roles []string
			for _, msg := range last.Messages {
				roles = append(roles, msg.Role)
			}
			if strings.Join(roles, ",") != "system,user,assistant,user" || !slices.Equal(last.UserTexts, []string{tc.text, next}) {
				t.Fatalf("next request: roles %v, user texts %q", roles, last.UserTexts)
			}
			note, _ := last.Messages[2].Content.(string)
			if !strings.Contains(note, "failed") || len(last.Messages[2].ToolCalls) != 0 || strings.Contains(note, "partial ans") {
				t.Fatalf("boundary note = %+v", last.Messages[2])
			}
		})
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := c.Call(ctxT(t), "daemon.info", nil, &info); err != nil || info.PID != pid {
		t.Fatalf("daemon.info: %+v %v", info, err)
	}
}
