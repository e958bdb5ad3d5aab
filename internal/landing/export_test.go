package landing

// SetAfterVerify makes every verification of l call f with its task once
// it has released the task, before it returns. Set it before anything
// verifies.
func SetAfterVerify(l *Lander, f func(taskID string)) { l.afterVerify = f }
