// The console works without this file; it only adds the "Copy" buttons' clipboard action.
document.addEventListener('click', function (event) {
  var button = event.target.closest('button[data-copy]')
  if (!button) return
  var input = document.getElementById(button.getAttribute('data-copy'))
  if (!input) return
  input.select()
  // The button keeps its name ("Copy": CONTRACT §15); "Copied" shows beside it for two seconds, in
  // the live region the page has there from the start (read out by screen readers).
  var note = button.nextElementSibling
  var done = function () {
    if (!note || !note.classList.contains('copied')) return
    note.textContent = 'Copied'
    clearTimeout(note.copiedTimer)
    note.copiedTimer = setTimeout(function () { note.textContent = '' }, 2000)
  }
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand('copy'); done() })
  else { document.execCommand('copy'); done() }
})
