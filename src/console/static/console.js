// The console works without this file; it only adds the "Copy" buttons' clipboard action.
document.addEventListener('click', function (event) {
  var button = event.target.closest('button[data-copy]')
  if (!button) return
  var input = document.getElementById(button.getAttribute('data-copy'))
  if (!input) return
  input.select()
  // The button keeps its name ("Copy": CONTRACT §15); "Copied" shows beside it, read out by screen
  // readers (aria-live), for two seconds.
  var note = button.nextElementSibling
  if (!note || !note.classList.contains('copied')) {
    note = document.createElement('span')
    note.className = 'copied'
    note.setAttribute('aria-live', 'polite')
    button.after(note)
  }
  var done = function () { note.textContent = 'Copied'; setTimeout(function () { note.textContent = '' }, 2000) }
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand('copy'); done() })
  else { document.execCommand('copy'); done() }
})
