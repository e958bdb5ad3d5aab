package store_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestTaskGraph(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	storetest.Project(t, s, "q")
	// done → root → mid → leaf; done → side; far → root; q has its own task.
	ids := storetest.Tasks(t, s, "p",
		models.BatchTask{LocalID: "done", Title: "done"},
		models.BatchTask{LocalID: "far", Title: "far"},
		models.BatchTask{LocalID: "root", Title: "root", Dependencies: storetest.Deps("done", "far")},
		models.BatchTask{LocalID: "mid", Title: "mid", Dependencies: storetest.Deps("root")},
		models.BatchTask{LocalID: "leaf", Title: "leaf", Dependencies: storetest.Deps("mid")},
		models.BatchTask{LocalID: "side", Title: "side", Dependencies: []models.BatchDependency{{ID: "done", RequiresSuccess: f()}}},
	)
	storetest.Tasks(t, s, "q", models.BatchTask{LocalID: "other", Title: "other"})
	storetest.Apply(t, s, ids["done"], storetest.ToCompleted...)
	storetest.Apply(t, s, ids["far"], storetest.ToCompleted...)
	storetest.Apply(t, s, ids["root"], storetest.ToBlocked...)
	name := map[string]string{}
	for k, v := range ids {
		name[v] = k
	}
	names := func(g models.TaskGraph) (tasks, edges []string) {
		for _, task := range g.Tasks {
			tasks = append(tasks, name[task.ID])
		}
		for _, e := range g.Edges {
			edges = append(edges, name[e.Upstream]+">"+name[e.Downstream])
		}
		slices.Sort(tasks)
		slices.Sort(edges)
		return tasks, edges
	}
	tests := []struct {
		name         string
		q            models.TaskGraphQuery
		tasks, edges []string
	}{
		{"open work of a project", models.TaskGraphQuery{ProjectID: "p"},
			[]string{"leaf", "mid", "root", "side"}, []string{"mid>leaf", "root>mid"}},
		{"neighbourhood of depth 1", models.TaskGraphQuery{Around: ids["mid"], Depth: 1},
			[]string{"leaf", "mid", "root"}, []string{"mid>leaf", "root>mid"}},
		{"neighbourhood of the default depth", models.TaskGraphQuery{Around: ids["leaf"]},
			[]string{"leaf", "mid", "root"}, []string{"mid>leaf", "root>mid"}},
		{"neighbourhood reaches completed upstreams", models.TaskGraphQuery{Around: ids["root"]},
			[]string{"done", "far", "leaf", "mid", "root"}, []string{"done>root", "far>root", "mid>leaf", "root>mid"}},
		{"root cause added beyond the depth", models.TaskGraphQuery{Around: ids["leaf"], Depth: 1},
			[]string{"leaf", "mid", "root"}, []string{"mid>leaf", "root>mid"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, err := s.TaskGraph(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			tasks, edges := names(g)
			if !slices.Equal(tasks, tc.tasks) || !slices.Equal(edges, tc.edges) || g.Truncated {
				t.Fatalf("got tasks %v edges %v (truncated %v), want %v and %v", tasks, edges, g.Truncated, tc.tasks, tc.edges)
			}
		})
	}
	for _, tc := range []struct {
		name string
		q    models.TaskGraphQuery
		code models.ErrorCode
	}{
		{"neither", models.TaskGraphQuery{}, models.CodeInvalid},
		{"both", models.TaskGraphQuery{ProjectID: "p", Around: ids["mid"]}, models.CodeInvalid},
		{"deep", models.TaskGraphQuery{Around: ids["mid"], Depth: models.MaxGraphDepth + 1}, models.CodeInvalid},
		{"unknown project", models.TaskGraphQuery{ProjectID: "nope"}, models.CodeNotFound},
		{"unknown task", models.TaskGraphQuery{Around: "nope"}, models.CodeNotFound},
	} {
		if _, err := s.TaskGraph(ctx, tc.q); models.ErrorCodeOf(err) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
}

func TestTaskGraphIsCappedAndSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "p")
	b := models.TaskBatch{ProjectID: "p", CreatedBy: "ana"}
	for i := range models.MaxGraphTasks + 1 {
		b.Tasks = append(b.Tasks, models.BatchTask{Title: "t" + strconv.Itoa(i)})
	}
	if _, err := s.CreateTasks(ctx, b); err != nil {
		t.Fatal(err)
	}
	g, err := s.TaskGraph(ctx, models.TaskGraphQuery{ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tasks) != models.MaxGraphTasks || !g.Truncated || g.Tasks[0].Title != "t0" {
		t.Fatalf("got %d tasks (truncated %v, first %q), want the first %d and truncated", len(g.Tasks), g.Truncated,
			g.Tasks[0].Title, models.MaxGraphTasks)
	}
}
