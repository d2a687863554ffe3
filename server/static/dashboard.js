// tileforge dashboard: copy buttons, auto-submitting filters, live job progress (server-sent events).
"use strict";

const MAX_STREAMS = 4; // browsers allow ~6 connections per host; leave room to navigate

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text);
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
  return Promise.resolve();
}

function setUpCopyButtons() {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", () => {
      const label = button.textContent;
      copyText(button.dataset.copy).then(() => {
        button.textContent = "Copied";
        button.classList.add("copied");
        setTimeout(() => { button.textContent = label; button.classList.remove("copied"); }, 1500);
      });
    });
  }
}

function setUpAutoSubmit() {
  for (const form of document.querySelectorAll("form[data-autosubmit]")) {
    for (const select of form.querySelectorAll("select")) {
      select.addEventListener("change", () => form.requestSubmit());
    }
  }
}

function field(root, name) {
  return root.querySelector(`[data-field="${name}"]`);
}

function showJob(root, job) {
  const status = field(root, "status") || document.querySelector(`[data-field="status"]`);
  if (status) {
    status.textContent = job.status;
    status.className = `badge status-${job.status}`;
  }
  const progress = field(root, "progress");
  if (progress) {
    progress.value = job.progress;
    progress.className = `progress status-${job.status}`;
  }
  const percent = field(root, "percent");
  if (percent) percent.textContent = `${Math.round(job.progress * 100)}%`;
  const stage = field(root, "stage");
  if (stage) stage.textContent = job.stage || "waiting for a worker";
  const cache = field(root, "cache");
  if (cache && job.cache_hits !== null) cache.textContent = `${job.cache_hits} / ${job.cache_hits + (job.cache_misses || 0)}`;
  const error = field(root, "error");
  if (error && job.error && job.status === "failed") {
    error.textContent = job.error; // text, never markup
    error.hidden = false;
  }
  const steps = root.querySelectorAll(".stepper li");
  const names = Array.from(steps, (li) => li.dataset.stage);
  const current = job.status === "succeeded" ? names.length : names.indexOf(job.stage);
  steps.forEach((li, i) => {
    li.classList.toggle("done", i < current);
    li.classList.toggle("current", i === current && job.status === "running");
    li.classList.toggle("failed", i === current && job.status === "failed");
  });
}

// Set once the user starts leaving the page (a link followed here, a form sent): a job ending at
// that moment must not reload the page over the navigation the user asked for. Clicks and
// submits, not "beforeunload": a listener of that keeps chromium from closing a page at once.
let leaving = false;

function setUpLeaving() {
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[href]");
    const here = event.button === 0 && !(event.metaKey || event.ctrlKey || event.shiftKey || event.altKey);
    if (link && here && !event.defaultPrevented && !link.hasAttribute("download") && link.target !== "_blank") {
      leaving = true;
    }
  });
  document.addEventListener("submit", (event) => { if (!event.defaultPrevented) leaving = true; });
}

function follow(root) {
  const source = new EventSource(root.dataset.events);
  source.addEventListener("status", (event) => showJob(root, JSON.parse(event.data)));
  source.addEventListener("end", () => {
    source.close();
    // The finished page has what only the end brings: timings, kernels, the artifact link.
    if (leaving) return;
    if (root.hasAttribute("data-reload-on-end") || root.closest("table")) window.location.reload();
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) root.classList.add("stream-closed");
  };
}

function setUpLiveJobs() {
  const live = Array.from(document.querySelectorAll("[data-events]")).slice(0, MAX_STREAMS);
  live.forEach(follow);
}

document.addEventListener("DOMContentLoaded", () => {
  setUpCopyButtons();
  setUpAutoSubmit();
  setUpLeaving();
  setUpLiveJobs();
});
