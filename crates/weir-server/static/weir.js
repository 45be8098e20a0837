// weir's dashboard script: no dependencies, nothing fetched but this server's own pages.
// - Live refresh: every `data-refresh` seconds (on <body>), the page is fetched again and its
//   <main> swapped in place; paused while the tab is hidden or a form in <main> is in use.
// - Log tail: <pre id="log" data-src="…"> streams a task attempt's log (follow=true) as it grows.
(function () {
  'use strict';
  var secs = Number(document.body.dataset.refresh || 0);
  var busy = false;

  function formInUse() {
    var a = document.activeElement;
    return a && a.closest && a.closest('main form') !== null && a.tagName !== 'BUTTON';
  }

  function refresh() {
    if (busy || document.hidden || formInUse()) return;
    busy = true;
    fetch(location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (r) {
        if (r.redirected && r.url.indexOf('/login') >= 0) { location.assign(r.url); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (text) {
        if (!text) return;
        var fresh = new DOMParser().parseFromString(text, 'text/html').querySelector('main');
        var here = document.querySelector('main');
        if (fresh && here) here.replaceWith(fresh);
      })
      .catch(function () { /* the server is restarting: keep the page and try again later */ })
      .then(function () { busy = false; });
  }

  if (secs > 0) setInterval(refresh, secs * 1000);

  var log = document.getElementById('log');
  if (log && log.dataset.src && window.ReadableStream) {
    var status = document.getElementById('log-status');
    var decoder = new TextDecoder();
    var first = true;
    fetch(log.dataset.src, { credentials: 'same-origin' }).then(function (r) {
      if (!r.ok || !r.body) { if (status) status.textContent = 'the log is not available'; return; }
      var reader = r.body.getReader();
      function pump() {
        return reader.read().then(function (chunk) {
          if (chunk.done) {
            log.dataset.state = 'ended';
            if (status) status.textContent = status.dataset.ended || 'the attempt has ended';
            return;
          }
          if (first) { log.textContent = ''; first = false; }
          var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
          log.textContent += decoder.decode(chunk.value, { stream: true });
          if (atBottom) log.scrollTop = log.scrollHeight;
          return pump();
        });
      }
      return pump();
    }).catch(function () { if (status) status.textContent = 'the log stream was interrupted; reload to resume'; });
  }
})();
