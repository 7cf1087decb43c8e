package testcluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/testcluster"
)

// chromium returns Debian's chromium, installing it with apt-get when it
// is missing, and skips the test only when that is impossible (no apt-get,
// not root, no package).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := osexec.LookPath(name); err == nil {
			return p
		}
	}
	apt, err := osexec.LookPath("apt-get")
	if err != nil {
		t.Skip("chromium is not installed and there is no apt-get to install it: apt-get install chromium")
	}
	if os.Geteuid() != 0 {
		t.Skip("chromium is not installed and installing it needs root: sudo apt-get install chromium")
	}
	t.Log("installing Debian's chromium (apt-get install chromium)")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	install := func() ([]byte, error) {
		cmd := osexec.CommandContext(ctx, apt, "install", "-y", "--no-install-recommends", "-o", "DPkg::Lock::Timeout=600", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	out, err := install()
	if err != nil {
		// The package lists may be missing or stale.
		if upd, uerr := osexec.CommandContext(ctx, apt, "update").CombinedOutput(); uerr != nil {
			t.Skipf("chromium cannot be installed: apt-get update: %v\n%s", uerr, upd)
		}
		if out, err = install(); err != nil {
			t.Skipf("chromium cannot be installed: %v\n%s", err, out)
		}
	}
	p, err := osexec.LookPath("chromium")
	if err != nil {
		t.Fatalf("apt-get installed chromium but it is not on PATH: %v\n%s", err, out)
	}
	return p
}

// headless runs chromium headless on url with args (--dump-dom,
// --screenshot=…) and returns what it printed on stdout. Chromium itself
// crashes now and then on a loaded machine (a segmentation fault before
// the page loaded); such a run is tried again, twice at most, since it
// says nothing of the page.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		a := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=8000"}, args...)
		cmd := osexec.CommandContext(ctx, bin, append(a, url)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err == nil {
			return stdout.String()
		}
		var exit *osexec.ExitError
		if errors.As(err, &exit) && !exit.Exited() && ctx.Err() == nil && attempt < 3 {
			t.Logf("chromium %v %s crashed (%v); running it again", args, url, err)
			continue
		}
		t.Fatalf("chromium %v %s: %v\n%s", args, url, err, lastLines(stderr.String(), 30))
	}
}

var (
	memberRow = regexp.MustCompile(`<tr data-id="([^"]+)" data-role="([^"]*)" data-leader="(true|false)"`)
	hiddenTag = regexp.MustCompile(`<(main|form) id="(view|login)"[^>]*>`)
)

// TestStatusPageInChromium loads the status page of a 3-node cluster in a
// real headless Chromium: with the token it shows 3 members, each a voter,
// one of them the leader; without it, the login form and no member at all.
// It saves a screenshot; with DUCKRAFT_STATUS_SCREENSHOT=path it is also
// copied there (docs/img/status-page.png is made that way).
func TestStatusPageInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and Chromium")
	}
	bin := chromium(t)
	c := testcluster.Start(t, 3, testcluster.Options{})
	l := c.WaitForLeader(t, 20*time.Second)
	n := c.Others(l)[0]
	// The page shows what the node knows: wait until gossip has told it
	// of all three, alive, and who leads.
	waitFor(t, 30*time.Second, func() bool {
		st, err := n.OpsStatus()
		if err != nil || st.LeaderID == "" || len(st.Members) != 3 {
			return false
		}
		for _, m := range st.Members {
			if m.State != "alive" {
				return false
			}
		}
		return true
	}, func() string { st, err := n.OpsStatus(); return fmt.Sprintf("%s /status: %+v %v", n.ID, st, err) })

	page := "http://" + n.HTTPAddr + "/"
	// The page must show what the node knows when it loads. On a starved
	// machine an election can fall between the wait above and the load
	// (the page then says so: no leader, or another one), so a load is
	// judged against the leader the node names right after it, and a
	// load during an election is tried again.
	var dom string
	for attempt := 1; ; attempt++ {
		dom = headless(t, bin, page+"?token="+testcluster.Token, "--dump-dom")
		rows := memberRow.FindAllStringSubmatch(dom, -1)
		var leaders []string
		for _, r := range rows {
			if r[3] == "true" {
				leaders = append(leaders, r[1])
			}
			if r[2] != "voter" {
				t.Errorf("the page shows %s as %q, want voter", r[1], r[2])
			}
		}
		st, err := n.OpsStatus()
		if len(rows) == 3 && len(leaders) == 1 && err == nil && st.LeaderID == leaders[0] {
			break
		}
		if attempt == 5 {
			t.Fatalf("the page shows %d members, leaders %v, the node's leader is %q (%v); want 3 members and that one leader. DOM:\n%s",
				len(rows), leaders, st.LeaderID, err, dom)
		}
		t.Logf("load %d: the page shows %d members, leaders %v, the node's leader is %q: an election between the load and the check; loading again",
			attempt, len(rows), leaders, st.LeaderID)
		time.Sleep(2 * time.Second)
	}
	if !strings.Contains(dom, `<span id="node">`+n.ID+`</span>`) {
		t.Errorf("the page does not name node %s", n.ID)
	}
	// Each member links to its own page, and the quorum is spelled out.
	for _, m := range c.Nodes {
		if link := `<a href="http://` + m.HTTPAddr + `/">` + m.ID + `</a>`; !strings.Contains(dom, link) {
			t.Errorf("the page has no link %s", link)
		}
	}
	if !strings.Contains(dom, "quorum: 3 of 3 voters alive, 2 needed") {
		t.Errorf("the page has no quorum line. DOM:\n%s", dom)
	}
	tags := hiddenTag.FindAllStringSubmatch(dom, -1)
	if len(tags) != 2 {
		t.Errorf("the page has %d of its view and login form", len(tags))
	}
	for _, tag := range tags {
		if hidden := strings.Contains(tag[0], "hidden"); hidden != (tag[2] == "login") {
			t.Errorf("with the token, %s", tag[0])
		}
	}

	// Without the token the page is the same static file and shows nothing
	// of the cluster.
	anon := headless(t, bin, page, "--dump-dom")
	if rows := memberRow.FindAllString(anon, -1); len(rows) != 0 || strings.Contains(anon, l.ID) {
		t.Fatalf("without the token the page shows the cluster: %d member rows. DOM:\n%s", len(rows), anon)
	}
	tags = hiddenTag.FindAllStringSubmatch(anon, -1)
	if len(tags) != 2 {
		t.Errorf("the page without the token has %d of its view and login form", len(tags))
	}
	for _, tag := range tags {
		if hidden := strings.Contains(tag[0], "hidden"); hidden != (tag[2] == "view") {
			t.Errorf("without the token, %s", tag[0])
		}
	}

	// The node stops answering while the page is open: the page says so
	// in red, with the time of its last answer, and greys what it showed.
	// A proxy in front of the node answers the page's first two /status
	// polls and then drops the connection of every other, as a dead node.
	target, err := url.Parse("http://" + n.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	var polls atomic.Int32
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" && polls.Add(1) > 2 {
			panic(http.ErrAbortHandler)
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	gone := headless(t, bin, proxy.URL+"/?token="+testcluster.Token, "--dump-dom")
	if !strings.Contains(gone, `<span id="ready" class="badge bad">unreachable</span>`) ||
		!strings.Contains(gone, "has not answered since") || !strings.Contains(gone, `<main id="view" class="stale"`) {
		t.Errorf("after its node stopped answering (%d polls), the page shows:\n%s", polls.Load(), gone)
	}

	// A screenshot while writes go on, so that the chart has a line.
	conn := l.Client(t)
	exec(t, conn, "CREATE TABLE page(i INTEGER)")
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		write(ctx, conn)
	}()
	shot := filepath.Join(t.TempDir(), "status-page.png")
	headless(t, bin, page+"?token="+testcluster.Token, "--screenshot="+shot, "--window-size=1100,900", "--hide-scrollbars")
	stop()
	wg.Wait()
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10_000 {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if dst := os.Getenv("DUCKRAFT_STATUS_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// write inserts rows through conn until ctx ends.
func write(ctx context.Context, conn *client.Conn) {
	for i := 0; ctx.Err() == nil; i++ {
		rows, err := conn.Query(ctx, fmt.Sprintf("INSERT INTO page VALUES (%d)", i))
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		rows.Close()
	}
}
