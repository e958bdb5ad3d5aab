package agent

// ProcScansForTest returns how many times the whole process table was read.
func ProcScansForTest() int64 { return procScans.Load() }

// GroupAliveForTest reports whether a live process is in group pgid.
func GroupAliveForTest(pgid int) bool { return groupAlive(pgid) }
