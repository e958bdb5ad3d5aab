// agentqueued dashboard: live updates. The page works without this file;
// with it, each change of the daemon's state (an event "change" on the
// page's stream, .../events) re-reads the page and replaces its live parts
// (elements with data-live and an id), and a task page's log grows by the
// stream's "log" events. One request at a time: changes arriving during a
// re-read cause one more re-read after it, never a burst.
(function () {
  'use strict';
  var url = document.body.getAttribute('data-events');
  if (!url || !window.EventSource || !window.fetch || !window.DOMParser) {
    return;
  }
  var busy = false;
  var again = false;

  function replaceLive(doc) {
    var live = document.querySelectorAll('[data-live][id]');
    for (var i = 0; i < live.length; i++) {
      var el = live[i];
      var fresh = doc.getElementById(el.id);
      if (!fresh || fresh.innerHTML === el.innerHTML) {
        continue;
      }
      // A part being typed in or focused is left alone until it is left.
      if (el.contains(document.activeElement) && document.activeElement !== document.body) {
        continue;
      }
      el.replaceWith(document.importNode(fresh, true));
    }
    document.body.setAttribute('data-refreshed', String(Date.now()));
  }

  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html', 'X-AQ-Live': '1' } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error('status ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        replaceLive(new DOMParser().parseFromString(html, 'text/html'));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }

  var es = new EventSource(url);
  es.addEventListener('change', refresh);
  es.addEventListener('log', function (e) {
    var log = document.getElementById('log');
    if (!log) {
      return;
    }
    var atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.append(e.data);
    if (atEnd) {
      log.scrollTop = log.scrollHeight;
    }
  });
  es.addEventListener('logreset', function (e) {
    var log = document.getElementById('log');
    if (log) {
      log.textContent = '';
      log.setAttribute('data-attempt', e.data);
    }
    var heading = document.getElementById('log-attempt');
    if (heading) {
      heading.textContent = ' of attempt ' + e.data;
    }
    var cut = document.getElementById('log-cut');
    if (cut) {
      cut.remove();
    }
  });
})();
