package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gitops-reverser/gitops-reverser/certs/replica"
	"github.com/gitops-reverser/gitops-reverser/gitops/batch"
)

// LocatePath is where the leader answers the other replicas' Locate questions: only its
// writer knows the folders' files, and without them a follower would admit what the leader
// denies (another object's file at the path, a namespace-less document of the object, an
// encrypted document), so a dry run and the apply after it could get different answers.
const LocatePath = "/writer/locate"

// maxLocateBytes bounds one question; a target and an object's names fit many times.
const maxLocateBytes = 16 << 10

// locateQuestion is the wire form of one Locate call.
type locateQuestion struct {
	Target    types.NamespacedName `json:"target"`
	Group     string               `json:"group"`
	Version   string               `json:"version"`
	Resource  string               `json:"resource"`
	Kind      string               `json:"kind"`
	Namespace string               `json:"namespace"`
	Name      string               `json:"name"`
}

// locateAnswer is the wire form of a batch.Location.
type locateAnswer struct {
	Path           string `json:"path,omitempty"`
	Problem        string `json:"problem,omitempty"`
	Encrypted      bool   `json:"encrypted,omitempty"`
	Absent         bool   `json:"absent,omitempty"`
	RemovalProblem string `json:"removalProblem,omitempty"`
}

// LocateServer is the leader's end: it answers replicas presenting the serving key pair
// with its writer's Locate.
type LocateServer struct {
	Locator Locator
	// Own is this replica's serving key pair, which a client must also present.
	Own replica.KeyPair
	// Elected is closed once this replica leads; before, questions are refused (503), so a
	// replica at a stale leader address never answers from an empty writer.
	Elected <-chan struct{}
	Log     logr.Logger
}

// ServeHTTP implements http.Handler.
func (s *LocateServer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !replica.Admit(w, req, s.Own, s.Elected, s.Log, "a locate question") {
		return
	}
	var q locateQuestion
	if err := json.NewDecoder(io.LimitReader(req.Body, maxLocateBytes)).Decode(&q); err != nil {
		http.Error(w, "malformed question", http.StatusBadRequest)
		return
	}
	at := s.Locator.Locate(q.Target, schema.GroupVersionResource{Group: q.Group, Version: q.Version, Resource: q.Resource}, q.Kind, q.Namespace, q.Name)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(locateAnswer{Path: at.Path, Problem: at.Problem, Encrypted: at.Encrypted, Absent: at.Absent, RemovalProblem: at.RemovalProblem})
}

// LeaderLocator is the Locator of every replica: the local writer's answer while this
// replica leads, else the leader's (LocateServer). When the leader cannot be asked (none
// known, a timeout, an election under way) it answers as the local writer does, which
// knows no target: the canonical path is used, and the writer still refuses what it cannot
// write, naming it in the GitTarget's status. After a failed question it asks nothing for
// quietAfterFailure, so an admission routed to several targets, or a stream of them, waits
// for one failure at most, not one per question.
type LeaderLocator struct {
	Local Locator
	// Elected is closed once this replica leads.
	Elected <-chan struct{}
	// Leader is the way to the leader's webhook server.
	Leader *replica.Leader
	Log    logr.Logger

	failedAt atomic.Int64 // Unix nanoseconds of the last failed question; 0: none
}

// quietAfterFailure is how long a replica judges alone after failing to ask the leader: the
// time a leader address is trusted (attribution.LeaseLeader), after which a new one is read.
const quietAfterFailure = 5 * time.Second

// Locate implements Locator.
func (l *LeaderLocator) Locate(target types.NamespacedName, gvr schema.GroupVersionResource, kind, namespace, name string) batch.Location {
	if replica.Closed(l.Elected) || time.Since(time.Unix(0, l.failedAt.Load())) < quietAfterFailure {
		return l.Local.Locate(target, gvr, kind, namespace, name)
	}
	var a locateAnswer
	q := locateQuestion{Target: target, Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Kind: kind, Namespace: namespace, Name: name}
	if err := l.Leader.Post(context.Background(), LocatePath, q, &a); err != nil {
		l.failedAt.Store(time.Now().UnixNano())
		l.Log.V(1).Info("judged without the leader's folder index", "gitTarget", target.String(), "error", err.Error())
		return l.Local.Locate(target, gvr, kind, namespace, name)
	}
	return batch.Location{Path: a.Path, Problem: a.Problem, Encrypted: a.Encrypted, Absent: a.Absent, RemovalProblem: a.RemovalProblem}
}
