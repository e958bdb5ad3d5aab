package discord

import (
	"slices"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Option names shared by several commands.
const (
	optProject  = "project"
	optTask     = "task"
	optAgent    = "agent"
	optQuestion = "question"
	optHook     = "hook"
	optSchedule = "schedule"
	optWorkflow = "workflow"
	optRun      = "run"
)

// destructive lists the commands that need an admin and a confirmation.
var destructive = map[string]bool{
	"task delete": true, "task stop": true, "project archive": true, "agent remove": true, "hook delete": true,
	"run cancel": true,
}

func str(name, desc string, required, autocomplete bool) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: name,
		Description: desc, Required: required, Autocomplete: autocomplete}
}

func integer(name, desc string, required bool) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionInteger, Name: name,
		Description: desc, Required: required}
}

func boolean(name, desc string) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionBoolean, Name: name, Description: desc}
}

func number(name, desc string) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionNumber, Name: name, Description: desc}
}

func channel(name, desc string) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionChannel, Name: name, Description: desc,
		ChannelTypes: []discordgo.ChannelType{discordgo.ChannelTypeGuildText}}
}

func sub(name, desc string, opts ...*discordgo.ApplicationCommandOption) *discordgo.ApplicationCommandOption {
	return &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: name,
		Description: desc, Options: opts}
}

func project(required bool) *discordgo.ApplicationCommandOption {
	return str(optProject, "Project id", required, true)
}

func task() *discordgo.ApplicationCommandOption { return str(optTask, "Task id", true, true) }

func agentOpt() *discordgo.ApplicationCommandOption { return str(optAgent, "Agent id", true, true) }

func verification() *discordgo.ApplicationCommandOption {
	o := str("verification", "How the work is checked", false, false)
	for _, v := range models.VerificationTypes {
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: string(v), Value: string(v)})
	}
	return o
}

// clearValue is what a person types in a text option of an edit to clear
// the field: Discord sends no empty text.
const clearValue = "-"

// routingFields are the options of /task edit for the fields a task is
// created with that decide where and how it runs.
func routingFields() []*discordgo.ApplicationCommandOption {
	agentType := str("agent_type", "Only agents of this type may take it (any: every agent)", false, false)
	agentType.Choices = append(agentType.Choices, &discordgo.ApplicationCommandOptionChoice{Name: "any", Value: clearValue})
	for _, t := range models.AgentTypes {
		agentType.Choices = append(agentType.Choices, &discordgo.ApplicationCommandOptionChoice{Name: t, Value: t})
	}
	return []*discordgo.ApplicationCommandOption{
		agentType,
		str("timeout", "End a run after this long, e.g. 90m or 2h (0: no cap of its own)", false, false),
		integer("expected_count", "How many items it will process (0: none said)", false),
		str("kind", "Kind, for rules and dedupe (- clears it)", false, false),
		str("metadata", "key=value pairs separated by ; replacing the metadata (- clears it)", false, false),
	}
}

func statusOpt() *discordgo.ApplicationCommandOption {
	o := str("status", "Only tasks in this status", false, false)
	for _, s := range models.TaskStatuses {
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: string(s), Value: string(s)})
	}
	return o
}

// commandDefinitions are the guild's slash commands, registered by bulk
// overwrite at start so stale ones disappear.
func commandDefinitions() []*discordgo.ApplicationCommand {
	taskFields := func(required bool) []*discordgo.ApplicationCommandOption {
		return []*discordgo.ApplicationCommandOption{
			str("title", "Short title", required, false),
			str("description", "What to do", false, false),
			integer("priority", "Higher runs first (default 0)", false),
			str("test_commands", "Commands that must pass, separated by ;", false, false),
			verification(),
			boolean("requires_approval", "Land through a pull request or a person's approval"),
		}
	}
	add := append(taskFields(true), str("depends_on", "Task ids this task waits for, separated by commas", false, false),
		project(false), str("profile", "Agent profile", false, false))
	return []*discordgo.ApplicationCommand{
		{Name: "status", Description: "Agents, task counts and what waits on you"},
		{Name: "project", Description: "Projects", Options: []*discordgo.ApplicationCommandOption{
			sub("create", "Create a project", str("id", "Project id (letters, digits, - and _)", true, false),
				str("name", "Display name", false, false), str("repo_url", "Repository to clone", false, false),
				channel("channel", "Channel for the project's notices"), number("credit_weight", "Share of agent time (default 1)"),
				integer("max_agents", "Agents at once (default 2)", false), integer("budget", "Token budget", false)),
			sub("list", "List projects"),
			sub("show", "Show a project", project(true)),
			sub("edit", "Change a project", project(true), str("name", "Display name", false, false),
				channel("channel", "Channel for the project's notices"), number("credit_weight", "Share of agent time"),
				integer("max_agents", "Agents at once", false), integer("budget", "Token budget (negative: unlimited)", false)),
			sub("pause", "Stop scheduling a project's tasks", project(true)),
			sub("resume", "Schedule a project's tasks again", project(true)),
			sub("archive", "Archive a project (admin)", project(true)),
		}},
		{Name: "task", Description: "Tasks", Options: []*discordgo.ApplicationCommandOption{
			sub("add", "Add a task", add...),
			sub("list", "List tasks", project(false), statusOpt()),
			sub("show", "Show a task", task()),
			sub("edit", "Change a task that is not running",
				slices.Concat([]*discordgo.ApplicationCommandOption{task()}, taskFields(false), routingFields())...),
			sub("deps", "Change a task's dependencies", task(), str("add", "Task ids to wait for, separated by commas", false, false),
				str("remove", "Task ids to stop waiting for, separated by commas", false, false),
				boolean("soft", "Added dependencies do not require success")),
			sub("restart", "Run a task again", task()),
			sub("skip", "Mark a failed or blocked task done", task()),
			sub("stop", "Stop a running task (admin)", task()),
			sub("cancel", "Cancel a task that has not finished: its run ends, it is BLOCKED (admin)", task(),
				str("reason", "Why, for the record", false, false)),
			sub("approve", "Approve a task waiting for you", task(), str("note", "Note for the record", false, false)),
			sub("reject", "Reject a task waiting for you", task(), str("feedback", "What must change", true, false)),
			sub("answer", "Answer a task's open question", task(), str("answer", "Your answer", true, false)),
			sub("result", "Show what a task's agent reported", task()),
			sub("diff", "Show the changes of a task", task()),
			sub("delete", "Delete a task (admin)", task()),
		}},
		{Name: "agent", Description: "Agents", Options: []*discordgo.ApplicationCommandOption{
			sub("add", "Register an agent (admin)", str("id", "Agent id", true, false), agentTypeOpt(),
				str("projects", "Only these projects, separated by commas", false, false)),
			sub("list", "List agents"),
			sub("pause", "Take no new task", agentOpt()),
			sub("resume", "Take tasks again", agentOpt()),
			sub("remove", "Remove an agent (admin)", agentOpt()),
		}},
		{Name: "hook", Description: "Hooks: automations on a schedule, a task event or by hand", Options: hookCommandOptions()},
		{Name: "workflow", Description: "Workflows: DAGs of tasks started by hand or on a schedule", Options: workflowCommandOptions()},
		{Name: "run", Description: "Runs of workflows", Options: runCommandOptions()},
		{Name: "budget", Description: "Token usage and budgets"},
		{Name: "questions", Description: "Open questions from agents"},
	}
}

func agentTypeOpt() *discordgo.ApplicationCommandOption {
	o := str("type", "Agent CLI", true, false)
	for _, t := range models.AgentTypes {
		if t == "command" {
			continue // command agents run any program: configuration file or API only
		}
		o.Choices = append(o.Choices, &discordgo.ApplicationCommandOptionChoice{Name: t, Value: t})
	}
	return o
}
