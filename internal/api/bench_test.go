package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// BenchmarkPostBatch10kTasks30kEdges measures one POST /api/v1/tasks of
// 10,000 tasks with 30,000 dependency edges (the store's
// BenchmarkCreateBatch10kTasks30kEdges graph) through the real HTTP
// handler, over loopback, into a fresh database file: the body read and
// checked, the batch created, and the 10,000 results encoded and read by
// the client.
func BenchmarkPostBatch10kTasks30kEdges(b *testing.B) {
	const tasks = 10_000
	body := batchBody(b, tasks, 30_000)
	const token = "t0ken"
	for range b.N {
		b.StopTimer()
		k := servicetest.New(b)
		storetest.Project(b, k.Store, "p")
		s, err := api.New(api.Config{Token: token, Logger: slog.New(slog.DiscardHandler)}, k.Service)
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(s.Handler())
		req, err := http.NewRequest(http.MethodPost, srv.URL+api.APIPrefix+"/tasks", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		b.StartTimer()
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.StopTimer()
		if err != nil || resp.StatusCode != http.StatusCreated {
			b.Fatalf("status %d, %v: %.300s", resp.StatusCode, err, data)
		}
		var out api.BatchResponse
		if err := json.Unmarshal(data, &out); err != nil || len(out.Results) != tasks {
			b.Fatalf("%d results, %v", len(out.Results), err)
		}
		srv.Close()
		b.StartTimer()
	}
}

// BenchmarkDecodeBatch10kTasks30kEdges measures the checks and decoding of
// the body of BenchmarkPostBatch10kTasks30kEdges alone (DecodeBatch), a
// body of the shape its one-pass reader takes.
func BenchmarkDecodeBatch10kTasks30kEdges(b *testing.B) {
	body := batchBody(b, 10_000, 30_000)
	b.SetBytes(int64(len(body)))
	for range b.N {
		if _, err := api.DecodeBatch(body); err != nil {
			b.Fatal(err)
		}
	}
}

// batchBody is the JSON of a batch of tasks with edges between them, each
// from a task to an earlier one, drawn with a fixed seed (the store's
// BenchmarkCreateBatch10kTasks30kEdges graph for 10,000 and 30,000).
func batchBody(b *testing.B, tasks, edges int) []byte {
	b.Helper()
	batch := storetest.RandomBatch(tasks, edges)
	body, err := json.Marshal(batch)
	if err != nil {
		b.Fatal(err)
	}
	return body
}
