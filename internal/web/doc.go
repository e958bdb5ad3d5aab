// Package web is agentqueued's web dashboard: server-rendered HTML pages
// under /ui/ on the API's listener (api.Config.UI mounts Server.Handler
// behind the API's Host and cross-origin checks), readable without
// JavaScript, with live updates by Server-Sent Events. Like the API and
// the Discord bot it is a thin client of the daemon's service: it asks
// for the areas it uses (Service, a composition of package areas'
// interfaces) and owns no state but the logins.
//
// # Pages
//
// A page is a Page value added by register in an init function of the
// file that implements it (overview.go, queue.go, task.go, ...):
//
//	func init() {
//		register(Page{Pattern: "GET " + Prefix + "/queue", Template: "queue", Nav: NavQueue, Load: (*Server).loadQueue})
//	}
//
// Load reads what the page shows through the service and returns it; the
// template executes with a View whose Data is Load's answer (so templates
// say .Data.Tasks), and whose other fields serve the layout: Nav (the
// navigation entry highlighted), CSRF (the session's token, for forms),
// Flash and Error (the last form's answer), Now, Path (the request's path
// and query: forms post it back as "back" to return there), Base (the
// path the session's pages are under: every link and form of a template
// starts with {{$.Base}}, never a literal /ui). Load's error
// is an error page: a models error shows its message with its status
// (not_found 404, invalid 400, conflict 409, ...), any other error is
// logged and shown as "internal error" — never its text.
//
// # Templates
//
// templates/layout.html defines the page around every page: the header
// with the navigation (navEntries: Overview, Queue, Projects, Workflows,
// Hooks, Budget), the flash message, and <main>. A page's file,
// templates/<Template>.html, defines two templates: "title" (the
// document's title) and "content" (what <main> holds). Each page's file
// is parsed with its own copy of the layout, so every page may define
// "title" and "content" without clashing. Templates and static files are
// embedded (go:embed); nothing is fetched from elsewhere. The functions
// templates may call are in funcs.go (statusClass, ago, elapsed, when,
// count, deref, percent, ...).
//
// Content-Security-Policy allows scripts, styles and images from the
// dashboard only, and no inline script or style attribute: style with
// classes of static/style.css (status colours: statusClass gives
// "status s-<STATUS>"), draw with inline SVG elements and their
// presentation attributes (fill, stroke), and script only in static/.
//
// # Live parts
//
// Every page behind the login opens GET /ui/events under its Base
// (Server-Sent Events; events.go): an event "change" follows each
// committed change of the daemon's state, and static/live.js then
// re-reads the page and replaces
// each element that has both an id and the attribute data-live by its new
// version. Mark the parts of a page that change with data-live and a
// stable id; keep forms a person types into outside them (a live part
// holding the focus is not replaced until it loses it). Page data that
// implements Live chooses its stream's URL (a task's page adds its log:
// events "log" appended to the element with id "log", and "logreset",
// which empties it and names the new attempt in the element with id
// "log-attempt").
//
// # Forms
//
// A state-changing form is an Action added by registerAction: a POST
// route whose Do acts through the service and returns the message shown
// on the next page and where to go (empty: the form's "back" field, else
// the overview). Every form carries the hidden field "csrf" ({{.CSRF}});
// the dashboard refuses with a 403 a post without the session's CSRF
// token, and (like the API) one a browser marks as cross-origin (Origin or
// Sec-Fetch-Site). An error of Do is shown on the next page as the
// models error's message, never an internal error's text. Actions record
// DefaultActor ("web") as who acted.
//
// # Login
//
// With a token configured (api.token), GET /ui/login asks for it and POST
// /ui/login starts a session: the session itself (its CSRF token, its
// flash) is kept in memory — never the token — and the browser gets its
// two halves, both random: a path secret, under which all the session's
// pages are (SessionPrefix + secret + "/overview", ...; the session's
// Base), and a session id in the cookie aq_session (HttpOnly,
// SameSite=Strict, Secure over TLS), scoped to that path
// (Path=/ui/s/<secret>/). sessionGate, in front of the routes, grants a
// request only when a cookie it carries names a live session whose path
// secret the path holds, and passes it on with the secret cut from its
// path: routes, Path, logs and error pages see /ui/... . Anything else is
// refused (refuse): a page with the way to the login page, which leads
// back to it under the new session's path, the event stream with 401, a
// form with 403. So a cookie another server on the host received (cookies
// are scoped by host, not port) grants nothing. Build links with
// {{$.Base}} in templates, baseOf or link in Go; never write a path
// secret anywhere else (Referrer-Policy keeps it on the dashboard's
// origin, and the API's logs cut it). Sessions expire after SessionTTL
// without a request and end at logout (POST .../logout) or when the
// daemon restarts. Without a token there is nothing to log in with: a
// session without a path secret (pages under Prefix, cookie at Path=/ui)
// is started on the first request (not on a subresource request another
// site starts: 403) and the dashboard is as open as the API, to whoever
// reaches the listen address (loopback by default; docs/web.md,
// docs/security.md).
package web
