module github.com/agentqueued/agentqueued

go 1.26

require (
	github.com/mattn/go-sqlite3 v1.14.53 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
