package models

// ReasonOf is an error's text for a task's reason: the user-safe message
// of a models.Error, else the error's text (a git or file error the task's
// owner needs to see), with the credentials of any URL in it removed
// (git's errors may quote one).
func ReasonOf(err error) string {
	if ErrorCodeOf(err) != CodeInternal {
		return RedactURL(ErrorMessageOf(err))
	}
	return RedactURL(err.Error())
}
