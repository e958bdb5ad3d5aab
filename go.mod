module github.com/agentqueued/agentqueued

go 1.26

require (
	github.com/mattn/go-sqlite3 v1.14.53
	go.uber.org/goleak v1.3.0
	gopkg.in/yaml.v3 v3.0.1
	pgregory.net/rapid v1.3.0
)

require github.com/kr/text v0.2.0 // indirect
