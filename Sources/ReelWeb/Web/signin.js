// Sign-in without leaving the page: a wrong password (401 after reel-web's throttle delay) is
// said here, the field keeps focus. Without JavaScript the form posts as usual.
"use strict";
const form = document.getElementById("signin");
const field = document.getElementById("password");
const error = document.getElementById("signin-error");
const button = form.querySelector("button");

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  button.disabled = true;
  error.hidden = true;
  button.textContent = "Checking…";
  try {
    const res = await fetch("/signin", {
      method: "POST",
      body: new URLSearchParams({password: field.value}),
      credentials: "same-origin",
    });
    if (res.ok && res.redirected) { location.assign(res.url); return; }
    if (res.ok) { location.assign("/"); return; }
    error.textContent = res.status === 401
      ? "Wrong password. Try again."
      : `Sign-in failed: reel-web answered ${res.status} ${res.statusText}.`;
  } catch (err) {
    error.textContent = `Cannot reach reel-web (${err.message}). Check that it runs, then try again.`;
  }
  error.hidden = false;
  button.disabled = false;
  button.textContent = "Sign in";
  field.select();
  field.focus();
});
