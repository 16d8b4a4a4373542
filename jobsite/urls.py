from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Django's default login path, where other apps and habits send people: the console's.
    path(
        "accounts/login/",
        login_not_required(
            RedirectView.as_view(pattern_name="queue_engine:login", query_string=True)
        ),
    ),
    path("", include("queue_engine.console.urls")),
]
