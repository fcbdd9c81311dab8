// The console works without this file; it only adds the "Copy" buttons' clipboard action.
document.addEventListener('click', function (event) {
  var button = event.target.closest('button[data-copy]')
  if (!button) return
  var input = document.getElementById(button.getAttribute('data-copy'))
  if (!input) return
  input.select()
  var done = function () { button.textContent = 'Copied'; setTimeout(function () { button.textContent = 'Copy' }, 2000) }
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(input.value).then(done, function () { document.execCommand('copy'); done() })
  else { document.execCommand('copy'); done() }
})
