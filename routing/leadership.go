package routing

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/duckraft/duckraft/replication"
)

// TransferPath moves leadership away from the node that serves it (POST,
// with the cluster token as a bearer token): to the voter named by the
// query parameter "to", or to the most up-to-date voter without one. It
// answers once the new leader has taken over.
const TransferPath = "/duckraft/v1/transfer-leadership"

// Transfer is the answer of TransferPath: the leader before and after.
type Transfer struct {
	From     string `json:"from"`
	LeaderID string `json:"leader_id"`
	Error    string `json:"error,omitempty"`
}

// Leadership is what TransferHandler needs of a node's Raft store.
type Leadership interface {
	TransferLeadership(to string) error
	LeaderID() string
	ID() string
}

// TransferHandler serves TransferPath. A node that does not lead answers
// 409 Conflict with the leader it knows, so callers can ask that one; an
// unknown or non-voting target is 400 Bad Request.
func TransferHandler(token string, store Leadership) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r, token) {
			http.Error(w, "Authentication failed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "use POST", http.StatusMethodNotAllowed)
			return
		}
		out := Transfer{From: store.ID()}
		code := http.StatusOK
		if err := store.TransferLeadership(r.URL.Query().Get("to")); err != nil {
			out.Error = err.Error()
			switch {
			case errors.Is(err, replication.ErrNotLeader):
				code = http.StatusConflict
			case errors.Is(err, replication.ErrNoSuchVoter):
				code = http.StatusBadRequest
			default:
				code = http.StatusInternalServerError
			}
		}
		out.LeaderID = store.LeaderID()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(out)
	})
}

// RequestTransfer asks the node whose Quack address is quackAddr to hand
// leadership to the voter to (any voter when empty), and returns its answer
// and HTTP status code.
func RequestTransfer(c *http.Client, quackAddr, token, to string) (Transfer, int, error) {
	target := "http://" + quackAddr + TransferPath
	if to != "" {
		target += "?to=" + url.QueryEscape(to)
	}
	req, err := http.NewRequest(http.MethodPost, target, nil)
	if err != nil {
		return Transfer{}, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return Transfer{}, 0, err
	}
	defer resp.Body.Close()
	var res Transfer
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return Transfer{}, resp.StatusCode, fmt.Errorf("transfer leadership: %s", resp.Status)
	}
	return res, resp.StatusCode, nil
}
