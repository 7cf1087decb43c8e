package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/cmd/duckraftd/daemon"
)

// OpsGet asks n's operations address (Node.HTTPAddr) for path, with the
// cluster token when authorized, and returns the HTTP status and body.
func (n *Node) OpsGet(path string, authorized bool) (int, string, error) {
	return opsGet(n.HTTPAddr, path, authorized)
}

// OpsGet asks the router's operations address for path.
func (r *Router) OpsGet(path string, authorized bool) (int, string, error) {
	return opsGet(r.HTTPAddr, path, authorized)
}

func opsGet(addr, path string, authorized bool) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	if authorized {
		req.Header.Set("Authorization", "Bearer "+Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s%s: %w", addr, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s%s: %w", addr, path, err)
	}
	return resp.StatusCode, string(b), nil
}

// OpsStatus is n's /status.
func (n *Node) OpsStatus() (daemon.Status, error) {
	var st daemon.Status
	code, body, err := n.OpsGet(daemon.StatusPath, true)
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("%s /status answered %d: %s", n.ID, code, body)
	}
	return st, json.Unmarshal([]byte(body), &st)
}

// Metric is the value of one series in n's /metrics, named as Prometheus'
// text format writes it, labels in name order: for example
// duckraft_writes_total{node="n1",outcome="ok"}. A series that is not
// there is an error.
func (n *Node) Metric(series string) (float64, error) {
	code, body, err := n.OpsGet(daemon.MetricsPath, true)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("%s /metrics answered %d: %s", n.ID, code, body)
	}
	return MetricIn(body, series)
}

// MetricIn finds series in a /metrics body.
func MetricIn(body, series string) (float64, error) {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	return 0, fmt.Errorf("no series %s in /metrics", series)
}
