from django.urls import path
from shop import views

urlpatterns = [
    path("orders/", views.create_order),
    path("orders/on-commit/", views.create_order_on_commit),
]
